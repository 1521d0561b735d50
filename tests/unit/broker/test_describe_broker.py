"""DescribeBroker's per-partition report: the broker's own log and HW, and on the leader only,
each follower's fetch state (what `minibroker topics describe` computes lags from)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import cast

from broker.grpc_answers import replica_description
from broker.log.log import Log
from broker.partition_table import HostedPartition
from broker.replication.leader_epoch import LeaderEpochCache
from broker.replication.partition import Partition, PartitionState
from minibroker.core.types import TopicPartition

TP = TopicPartition("t", 3)


@dataclass
class Offsets:
    log_end_offset: int = 0
    log_start_offset: int = 0
    epoch_cache: LeaderEpochCache = field(default_factory=LeaderEpochCache)
    open: dict[int, int] = field(default_factory=dict)  # producer id -> first offset

    def last_stable_offset(self, hw: int) -> int:
        return min([hw, *self.open.values()])

    def open_transactions(self) -> dict[int, int]:
        return dict(self.open)

    def producer_last_timestamp(self, producer_id: int) -> int:
        return 1_000 + producer_id


def hosted(local: int, leader: int, leo: int) -> tuple[HostedPartition, Offsets]:
    log = Offsets(log_end_offset=leo, log_start_offset=2)
    p = Partition(TP, local_broker_id=local, replica_lag_time_max_ms=30_000)
    state = PartitionState(leader, 5, (1, 2), (1, 2, 3), zk_version=0, controller_epoch=1)
    if local == leader:
        p.make_leader(state, log, now_ms=1_000)
    else:
        p.make_follower(state)
    return HostedPartition(p, cast(Log, log)), log


def test_the_leader_reports_its_log_its_isr_and_each_followers_fetch_offset() -> None:
    h, log = hosted(local=1, leader=1, leo=10)
    h.partition.update_follower_fetch_state(
        2,
        fetch_offset=10,
        log_start_offset=2,
        fetch_time_ms=1_500,
        leader_end_offset=10,
        local_leo=10,
    )
    d = replica_description(TP, h, now_ms=2_000)
    assert (d.topic, d.partition, d.is_leader, d.leader, d.leader_epoch) == ("t", 3, True, 1, 5)
    assert (d.log_start_offset, d.log_end_offset, d.high_watermark) == (2, 10, 0)
    assert list(d.isr) == [1, 2]
    remotes = {r.broker_id: (r.log_end_offset, r.last_caught_up_ms_ago) for r in d.remote_replicas}
    # Broker 3 has not fetched since this broker became leader: its LEO is unknown (-1), and it
    # has not caught up since (-1).
    assert remotes == {2: (10, 500), 3: (-1, -1)}
    assert d.HasField("last_stable_offset") and d.last_stable_offset == 0
    log.open = {7: 4}
    d = replica_description(TP, h, now_ms=2_000)
    got = [(t.producer_id, t.first_offset, t.last_timestamp) for t in d.open_transactions]
    assert got == [(7, 4, 1_007)]


def test_a_follower_reports_its_own_log_and_hw_and_no_remote_replicas() -> None:
    h, log = hosted(local=2, leader=1, leo=7)
    h.partition.update_follower_high_watermark(6, log)
    d = replica_description(TP, h, now_ms=0)
    assert (d.is_leader, d.leader, d.log_end_offset, d.high_watermark) == (False, 1, 7, 6)
    assert list(d.isr) == [] and list(d.remote_replicas) == []
    assert not d.HasField("last_stable_offset")  # only the leader knows it
