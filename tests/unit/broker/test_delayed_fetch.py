"""A fetch waiting in the purgatory (Kafka's DelayedFetch) over real partitions and logs: it
completes when min_bytes become readable, or at once on an error, and when one partition
changes it looks at that partition only (a follower's fetch of thousands of partitions is not
re-read on every append to one of them)."""

from __future__ import annotations

import asyncio
from collections import Counter

from broker.delayed import DelayedFetch
from broker.fetch import reads as fetch_reads
from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from broker.partition_table import HostedPartition, PartitionTable
from broker.purgatory import Purgatory
from broker.replication.partition import Partition, PartitionState
from broker.types import FetchParams, FetchPartitionRequest, FetchPartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition

TPS = [TopicPartition("t", p) for p in range(200)]


def batch(value: bytes) -> bytes:
    return build_batch([NewRecord(None, value)], base_timestamp=1_700_000_000_000)


def leaders() -> PartitionTable:
    table: PartitionTable = {}
    for tp in TPS:
        log = Log(MemorySegmentStore())
        p = Partition(tp, local_broker_id=1, replica_lag_time_max_ms=30_000)
        p.make_leader(PartitionState(1, 0, (1, 2), (1, 2), 0, 1), log, now_ms=0)
        table[tp] = HostedPartition(p, log)
    return table


def follower_fetch(table: PartitionTable) -> FetchParams:
    reqs = tuple(
        FetchPartitionRequest(tp, table[tp].log.log_end_offset, 1 << 20, current_leader_epoch=0)
        for tp in TPS
    )
    return FetchParams(replica_id=2, max_wait_ms=5_000, min_bytes=1, max_bytes=1 << 24,
                       partitions=reqs)  # fmt: skip


def waiting_fetch(
    table: PartitionTable, params: FetchParams, looked_at: Counter[TopicPartition]
) -> DelayedFetch:
    requests = {r.tp: r for r in params.partitions}

    def readable(tp: TopicPartition, up_to: int) -> int | None:
        looked_at[tp] += 1
        return fetch_reads.readable_bytes(table, requests[tp], params.is_follower, up_to)

    # As the replica manager makes it: after its own read found nothing.
    first = fetch_reads.read_all(table, params, {})

    def read(changed: list[TopicPartition]) -> dict[TopicPartition, FetchPartitionResult]:
        return fetch_reads.reread(table, params, first, [requests[tp] for tp in changed])

    return DelayedFetch(params.max_wait_ms, params.min_bytes, readable, read, {})


def test_an_append_completes_the_wait_looking_at_its_partition_only() -> None:
    async def body() -> dict[TopicPartition, FetchPartitionResult]:
        table = leaders()
        params = follower_fetch(table)
        purgatory: Purgatory[dict[TopicPartition, FetchPartitionResult]] = Purgatory()
        looked_at: Counter[TopicPartition] = Counter()
        op = waiting_fetch(table, params, looked_at)
        waiter = asyncio.ensure_future(purgatory.wait(op, [r.tp for r in params.partitions]))
        await asyncio.sleep(0)
        assert not waiter.done() and not looked_at  # the fetch's own read found nothing
        for tp in TPS[:50]:  # changes with nothing new to read keep it waiting
            purgatory.check(tp)
        assert not waiter.done()
        table[TPS[120]].log.append_as_leader(batch(b"news"), leader_epoch=0)
        assert purgatory.check(TPS[120]) == 1
        assert looked_at[TPS[120]] == 1 and sum(looked_at.values()) == 51
        result = await waiter
        assert purgatory.watched() == 0
        return result

    result = asyncio.run(body())
    assert len(result[TPS[120]].records) > 0
    assert all(not result[tp].records for tp in TPS if tp != TPS[120])


def test_a_lost_leadership_ends_the_wait_with_the_error() -> None:
    async def body() -> dict[TopicPartition, FetchPartitionResult]:
        table = leaders()
        params = follower_fetch(table)
        purgatory: Purgatory[dict[TopicPartition, FetchPartitionResult]] = Purgatory()
        op = waiting_fetch(table, params, Counter())
        waiter = asyncio.ensure_future(purgatory.wait(op, [r.tp for r in params.partitions]))
        await asyncio.sleep(0)
        table[TPS[3]].partition.make_follower(PartitionState(2, 1, (1, 2), (1, 2), 1, 1))
        purgatory.check(TPS[3])
        return await waiter

    result = asyncio.run(body())
    # The fetch named epoch 0; the partition moved on to epoch 1 (reference §3.7).
    assert result[TPS[3]].error is ErrorCode.FENCED_LEADER_EPOCH


def test_a_consumer_waits_for_the_high_watermark_not_the_log_end() -> None:
    async def body() -> None:
        table = leaders()
        tp = TPS[0]
        req = FetchPartitionRequest(tp, 0, 1 << 20)
        params = FetchParams(replica_id=-1, max_wait_ms=200, min_bytes=1, max_bytes=1 << 20,
                             partitions=(req,))  # fmt: skip
        table[tp].log.append_as_leader(batch(b"not yet committed"), leader_epoch=0)
        assert fetch_reads.readable_bytes(table, req, False, 1) == 0
        assert (fetch_reads.readable_bytes(table, req, True, 1) or 0) > 0
        purgatory: Purgatory[dict[TopicPartition, FetchPartitionResult]] = Purgatory()
        op = waiting_fetch(table, params, Counter())
        purgatory.check(tp)
        result = await purgatory.wait(op, [tp])  # expires: nothing below the HW
        assert result[tp].error is ErrorCode.NONE and result[tp].records == b""

    asyncio.run(body())
