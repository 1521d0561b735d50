"""A follower's incremental fetch on the leader: idle partitions are counted as fetched (the
rule's own update, caught up now) without a read; anything with news is read as usual."""

from __future__ import annotations

import asyncio

from broker.fetch.idle_followers import partitions_to_read
from broker.fetch.session_cache import (
    FetchSession,
    FetchSessionCache,
    request_lookup,
    waiting_in,
)
from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from broker.partition_table import HostedPartition, PartitionTable
from broker.purgatory import DelayedOperation
from broker.replication.partition import Partition, PartitionState
from broker.types import FetchPartitionRequest, FetchPartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition

TPS = [TopicPartition("t", p) for p in range(6)]
FOLLOWER = 2


def setup() -> tuple[PartitionTable, FetchSession, FetchSessionCache]:
    table: PartitionTable = {}
    for tp in TPS:
        log = Log(MemorySegmentStore())
        log.append_as_leader(
            build_batch([NewRecord(None, b"v")], base_timestamp=1_700_000_000_000), 0
        )
        p = Partition(tp, local_broker_id=1, replica_lag_time_max_ms=3_000)
        p.make_leader(PartitionState(1, 0, (1, 2), (1, 2), 0, 1), log, now_ms=0)
        p.update_follower_fetch_state(
            FOLLOWER,
            fetch_offset=1,
            log_start_offset=0,
            fetch_time_ms=100,
            leader_end_offset=1,
            local_leo=1,
        )
        table[tp] = HostedPartition(p, log)
    cache = FetchSessionCache(seed=1)
    reqs = [FetchPartitionRequest(tp, 1, 1 << 20, 0, 0) for tp in TPS]
    ctx = cache.context(session_id=0, epoch=0, replica_id=FOLLOWER, partitions=reqs,
                        forgotten=[], now_ms=0)  # fmt: skip
    assert not isinstance(ctx, ErrorCode) and ctx.session is not None
    ctx.response_partitions({tp: FetchPartitionResult(ErrorCode.NONE, 1, 0) for tp in TPS})
    return table, ctx.session, cache


def test_idle_partitions_are_not_read_but_count_as_caught_up_now() -> None:
    table, session, cache = setup()
    assert partitions_to_read(session, set(), table, FOLLOWER, 5_000) == ()
    for tp in TPS:
        replica = table[tp].partition.remote[FOLLOWER]
        assert (replica.last_caught_up_time_ms, replica.last_fetch_time_ms) == (5_000, 5_000)
        assert replica.log_end_offset == 1
        # An append right after does not make the follower look behind for the whole lag.
        assert not replica.is_out_of_sync(2, now_ms=5_100, lag_ms=3_000)


def test_partitions_with_news_or_named_are_read() -> None:
    table, session, cache = setup()
    table[TPS[0]].log.append_as_leader(
        build_batch([NewRecord(None, b"new")], base_timestamp=1_700_000_000_000), 0
    )  # the LEO moved
    table[TPS[1]].partition.high_watermark = 0  # an HW the follower was not sent
    table[TPS[2]].partition.isr = frozenset({1})  # out of the ISR: may need an expansion
    table[TPS[3]].partition.leader_epoch = 1  # the fetch's epoch is stale
    del table[TPS[4]]  # no longer hosted
    reads = partitions_to_read(session, {TPS[5]}, table, FOLLOWER, 5_000)
    assert [r.tp for r in reads] == TPS
    # Read partitions are left to §2.3's update after the read: nothing refreshed here.
    assert table[TPS[0]].partition.remote[FOLLOWER].last_fetch_time_ms == 100


def test_an_idle_partition_is_looked_at_again_once_it_changes() -> None:
    table, session, cache = setup()
    assert partitions_to_read(session, set(), table, FOLLOWER, 1_000) == ()
    table[TPS[0]].log.append_as_leader(
        build_batch([NewRecord(None, b"new")], base_timestamp=1_700_000_000_000), 0
    )
    cache.mark_changed(TPS[0])  # the replica manager's report of the append
    reads = partitions_to_read(session, set(), table, FOLLOWER, 2_000)
    assert [r.tp for r in reads] == [TPS[0]]
    for tp in TPS[1:]:  # still idle: counted as fetched now
        assert table[tp].partition.remote[FOLLOWER].last_caught_up_time_ms == 2_000
    assert table[TPS[0]].partition.remote[FOLLOWER].last_caught_up_time_ms == 1_000


class Waiter(DelayedOperation[TopicPartition]):
    """Completes with the first partition it is told changed."""

    def try_complete(self, changed: TopicPartition | None) -> TopicPartition | None:
        return changed

    def on_expiration(self) -> TopicPartition:
        raise AssertionError("the change should have completed it")


def test_a_waiting_fetch_is_retested_by_its_session_for_partitions_it_did_not_read() -> None:
    async def main() -> None:
        _, session, cache = setup()
        op = Waiter(timeout_ms=10_000)
        with waiting_in(session, op):
            assert session.waiting == {op}
            cache.mark_changed(TopicPartition("other", 0))  # not in the session: not re-tested
            assert not op.done
            cache.mark_changed(TPS[3])
            assert op.future.result() == TPS[3]
        assert session.waiting == set()

    asyncio.run(main())


def test_a_watched_partition_s_request_is_the_reads_own_or_the_sessions() -> None:
    _, session, _ = setup()
    own = FetchPartitionRequest(TPS[0], 7, 1 << 20, 0, 0)
    request_of = request_lookup({TPS[0]: own}, session)
    assert request_of(TPS[0]) is own
    assert request_of(TPS[1]) is session.partitions[TPS[1]].request
