"""A follower's fetch that found bytes lingers `minibroker.replica.fetch.linger.ms` for more,
so that several appends travel in one round trip, unless an acks=all produce waits on the
partition: then every millisecond would be the producer's, and it answers at once."""

from __future__ import annotations

import asyncio

from broker.delayed import AcksAllWaiters, DelayedFetch, Linger
from broker.fetch import reads as fetch_reads
from broker.partition_table import PartitionTable
from broker.purgatory import Purgatory
from broker.types import FetchParams, FetchPartitionResult
from minibroker.core.types import TopicPartition
from tests.unit.broker.test_delayed_fetch import TPS, batch, follower_fetch, leaders

Answer = dict[TopicPartition, FetchPartitionResult]
LINGER_MS = 300  # far above any scheduling hiccup: the tests see the order, not timings


def lingering_fetch(
    table: PartitionTable, params: FetchParams, waiters: AcksAllWaiters
) -> DelayedFetch:
    requests = {r.tp: r for r in params.partitions}
    first = fetch_reads.read_all(table, params, {})
    return DelayedFetch(
        params.max_wait_ms,
        params.min_bytes,
        lambda tp, n: fetch_reads.readable_bytes(table, requests[tp], True, n),
        lambda changed: fetch_reads.reread(table, params, first, [requests[tp] for tp in changed]),
        {},
        linger=Linger(LINGER_MS, waiters.urgent),
    )


def records_in(answer: Answer) -> dict[TopicPartition, int]:
    return {tp: len(r.records) for tp, r in answer.items() if r.records}


def append(table: PartitionTable, purgatory: Purgatory[Answer], tp: TopicPartition) -> None:
    table[tp].log.append_as_leader(batch(b"v"), leader_epoch=0)
    purgatory.check(tp)


def test_bytes_wait_the_linger_and_the_appends_meanwhile_go_in_the_same_answer() -> None:
    async def body() -> tuple[Answer, float]:
        table = leaders()
        params = follower_fetch(table)
        purgatory: Purgatory[Answer] = Purgatory()
        op = lingering_fetch(table, params, AcksAllWaiters())
        loop = asyncio.get_running_loop()
        waiter = asyncio.ensure_future(purgatory.wait(op, [r.tp for r in params.partitions]))
        await asyncio.sleep(0)
        started = loop.time()
        append(table, purgatory, TPS[3])
        await asyncio.sleep(0)
        assert not waiter.done()  # lingering
        append(table, purgatory, TPS[7])
        answer = await asyncio.wait_for(waiter, 5)
        return answer, loop.time() - started

    answer, took = asyncio.run(body())
    assert set(records_in(answer)) == {TPS[3], TPS[7]}
    assert took >= LINGER_MS / 1000 * 0.9  # counted from the first bytes, not the second


def test_an_acks_all_produce_waiting_on_the_partition_is_answered_at_once() -> None:
    async def body() -> tuple[bool, bool]:
        table = leaders()
        params = follower_fetch(table)
        purgatory: Purgatory[Answer] = Purgatory()
        waiters = AcksAllWaiters()
        op = lingering_fetch(table, params, waiters)
        waiter = asyncio.ensure_future(purgatory.wait(op, [r.tp for r in params.partitions]))
        await asyncio.sleep(0)
        append(table, purgatory, TPS[1])  # acks=1: lingers
        await asyncio.sleep(0)
        lingering = not waiter.done()
        with waiters.waiting([TPS[2]]):  # an acks=all append to another partition
            append(table, purgatory, TPS[2])
            await asyncio.sleep(0)
            answered = waiter.done()
        assert not waiters.urgent(TPS[2])  # nobody waits any more
        return lingering, answered and set(records_in(waiter.result())) == {TPS[1], TPS[2]}

    assert asyncio.run(body()) == (True, True)


def test_without_bytes_the_fetch_waits_its_max_wait_not_the_linger() -> None:
    async def body() -> bool:
        table = leaders()
        params = follower_fetch(table)
        purgatory: Purgatory[Answer] = Purgatory()
        op = lingering_fetch(table, params, AcksAllWaiters())
        waiter = asyncio.ensure_future(purgatory.wait(op, [r.tp for r in params.partitions]))
        await asyncio.sleep(LINGER_MS * 2 / 1000)
        done = waiter.done()
        waiter.cancel()
        return done

    assert asyncio.run(body()) is False


def test_waiters_count_overlapping_produces() -> None:
    waiters = AcksAllWaiters()
    with waiters.waiting([TPS[0]]):
        with waiters.waiting([TPS[0], TPS[1]]):
            assert waiters.urgent(TPS[0]) and waiters.urgent(TPS[1])
        assert waiters.urgent(TPS[0]) and not waiters.urgent(TPS[1])
    assert not waiters.urgent(TPS[0])
