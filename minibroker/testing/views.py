"""A partition's state as a test reads it: ZooKeeper's leader, epoch, replicas and ISR (what
the controller decided), joined with each replica's LEO and HW as its broker reports them
(DescribeBroker over gRPC; what the brokers are doing)."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from minibroker.client.admin import BrokerUnreachable, describe_broker
from minibroker.client.admin_zk import read_topic
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import TopicZNode
from minibroker.runtime.zk_store import ZkStore

# A paused broker accepts the connection and never answers: give up on it after this.
DESCRIBE_TIMEOUT_S = 2.0


def tp(topic: str, partition: int) -> TopicPartition:
    return TopicPartition(topic, partition)


@dataclass(frozen=True)
class ReplicaState:
    """One replica as its broker reports it: None where the broker did not answer."""

    broker: int
    log_end_offset: int | None
    high_watermark: int | None
    log_start_offset: int | None


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int  # -1: none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    replica_states: dict[int, ReplicaState]

    @property
    def high_watermark(self) -> int | None:
        """The leader's HW (what consumers may read up to), None if it did not answer."""
        leader = self.replica_states.get(self.leader)
        return None if leader is None else leader.high_watermark

    @property
    def fully_replicated(self) -> bool:
        return self.leader >= 0 and set(self.isr) == set(self.replicas)


class Reader:
    """What a role resolves against (minibroker/testing/roles.py), read from ZooKeeper."""

    def __init__(self, zk: ZkStore) -> None:
        self._zk = zk

    def read_controller(self) -> int | None:
        return self._zk.read_controller()

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self._zk.read_partition_state(tp)

    def read_topic_partition_count(self, topic: str) -> int | None:
        got = self._zk.get_or_none(TopicZNode.path(topic))
        return None if got is None else len(TopicZNode.decode(topic, got[0]).partitions)


def partition_state(
    brokers: Mapping[int, str], zk: ZkStore, topic: str, partition: int
) -> PartitionState:
    """The partition now, its replicas asked at `brokers` (gRPC addresses by broker id);
    ApiError(UNKNOWN_TOPIC_OR_PARTITION) if it does not exist."""
    info = read_topic(zk, topic)
    if info is None or partition not in info.assignment:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"no partition {partition} of topic {topic!r}"
        )
    replicas = tuple(info.assignment[partition])
    zk_state = info.states.get(partition)
    want = tp(topic, partition)

    def ask(broker: int) -> ReplicaState:
        address = brokers.get(broker)
        if address is None:
            return ReplicaState(broker, None, None, None)
        try:
            hosted = describe_broker(address, timeout_s=DESCRIBE_TIMEOUT_S).partitions
        except BrokerUnreachable:
            return ReplicaState(broker, None, None, None)
        r = hosted.get(want)
        if r is None:
            return ReplicaState(broker, None, None, None)
        return ReplicaState(broker, r.log_end_offset, r.high_watermark, r.log_start_offset)

    with ThreadPoolExecutor(max_workers=max(1, len(replicas))) as pool:
        got = dict(zip(replicas, pool.map(ask, replicas), strict=True))
    return PartitionState(
        topic=topic,
        partition=partition,
        leader=-1 if zk_state is None else zk_state.leader,
        leader_epoch=-1 if zk_state is None else zk_state.leader_epoch,
        replicas=replicas,
        isr=() if zk_state is None else tuple(zk_state.isr),
        replica_states=got,
    )
