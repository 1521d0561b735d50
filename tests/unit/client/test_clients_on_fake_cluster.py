"""Producer and Consumer against the in-memory FakeCluster: batching, retries after leader moves
and outages, fatal codes, delivery timeouts, resets and end offsets. No network."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from minibroker.client.consumer import Consumer
from minibroker.client.errors import OffsetOutOfRange, ProduceError, UnknownTopicError
from minibroker.client.producer import Producer
from minibroker.client.record_metadata import RecordMetadata
from minibroker.core.errors import ErrorCode
from minibroker.core.records import decode_records, iter_batches
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2
from tests.unit.client.fake_cluster import FakeCluster

T = TypeVar("T")
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
FAST: dict[str, Any] = {"retry_backoff_ms": 5, "request_timeout_ms": 1000}


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(asyncio.wait_for(coro, 20))


def producer(cluster: FakeCluster, **kw: Any) -> Producer:
    opts: dict[str, Any] = {**FAST, "linger_ms": 1, "partitioner_seed": 7, **kw}
    return Producer(cluster.addresses[1], channels=cluster, **opts)


def consumer(cluster: FakeCluster, **kw: Any) -> Consumer:
    opts: dict[str, Any] = {**FAST, "max_wait_ms": 5, **kw}
    return Consumer(cluster.addresses[2], channels=cluster, **opts)


async def send_all(p: Producer, values: list[bytes], **kw: Any) -> list[RecordMetadata]:
    futures = [await p.send("t", v, **kw) for v in values]
    return list(await asyncio.gather(*futures))


async def read_all(c: Consumer, want: int, timeout_ms: int = 5000) -> list[Any]:
    out: list[Any] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    while len(out) < want and loop.time() < deadline:
        out += await c.poll(50)
    return out


def test_records_of_one_partition_go_in_one_batch_and_get_consecutive_offsets() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 2)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster, linger_ms=50) as p:
            return await send_all(p, [b"a", b"b", b"c"], partition=1)

    metas = run(main())
    assert [(m.partition, m.offset) for m in metas] == [(1, 0), (1, 1), (1, 2)]
    assert len(list(iter_batches(cluster.records_in(TP1)))) == 1
    assert [r.value for r in decode_records(cluster.records_in(TP1))] == [b"a", b"b", b"c"]


def test_keyed_records_follow_murmur2_and_keyless_ones_stick_to_a_partition() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 3)

    async def main() -> tuple[list[RecordMetadata], list[RecordMetadata]]:
        async with producer(cluster, linger_ms=50) as p:
            keyed = await send_all(p, [b"x"] * 3, key=b"foobar")
            keyless = await send_all(p, [b"1", b"2", b"3"])
            return keyed, keyless

    keyed, keyless = run(main())
    # (murmur2("foobar") & 0x7fffffff) % 3 == (2147483647 & -790332482) % 3
    assert {m.partition for m in keyed} == {(-790332482 & 0x7FFFFFFF) % 3}
    assert len({m.partition for m in keyless}) == 1


def test_consumer_reads_back_what_was_acknowledged_in_order() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 2)
    values = [str(i).encode() for i in range(50)]

    async def main() -> list[Any]:
        async with producer(cluster, batch_size=200) as p:
            await send_all(p, values, partition=0)
        async with consumer(cluster) as c:
            c.assign([TP0, TP1])
            records = await read_all(c, 50)
            assert await c.position(TP0) == 50
            assert await c.position(TP1) == 0
            return records

    records = run(main())
    assert [r.value for r in records] == values
    assert [r.offset for r in records] == list(range(50))
    assert len(list(iter_batches(cluster.records_in(TP0)))) > 1  # batch_size split them


def test_producer_follows_a_leader_move_and_keeps_order() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster) as p:
            first = await send_all(p, [b"a", b"b"])
            cluster.move_leader(TP0, 2)
            second = await send_all(p, [b"c", b"d"])
            return first + second

    metas = run(main())
    assert [m.offset for m in metas] == [0, 1, 2, 3]
    assert ("broker2:9092", "Produce") in cluster.calls


def test_producer_retries_through_an_outage_of_the_leader() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster) as p:
            await p.partitions_for("t")
            cluster.down.add(1)
            fut = await p.send("t", b"v")
            await asyncio.sleep(0.05)
            assert not fut.done()
            cluster.move_leader(TP0, 3)  # the controller elects a new leader
            return [await fut]

    assert run(main())[0].offset == 0
    assert ("broker1:9091", "Produce") in cluster.calls or (
        "broker1:9091",
        "Metadata",
    ) in cluster.calls


def test_producer_asks_for_metadata_after_a_timeout_and_finds_the_new_leader() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster, metadata_max_age_ms=600_000) as p:
            first = await send_all(p, [b"a"])
            # Broker 1 was cut off and lost the leadership, but answers REQUEST_TIMED_OUT, never
            # NOT_LEADER: only fresh metadata leads the producer to broker 2.
            cluster.timing_out.add(1)
            cluster.move_leader(TP0, 2)
            return first + await send_all(p, [b"b"])

    assert [m.offset for m in run(main())] == [0, 1]
    produces = [a for a, m in cluster.calls if m == "Produce"]
    assert produces.count(cluster.addresses[1]) == 2  # the first record, and one timeout
    assert produces[-1] == cluster.addresses[2]


def test_producer_stops_sending_to_a_broker_it_cannot_reach_until_metadata_says_where() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster, retry_backoff_ms=1) as p:
            await p.partitions_for("t")
            cluster.down.add(1)
            cluster.move_leader(TP0, 3)
            return await send_all(p, [b"a"])

    assert run(main())[0].offset == 0
    produces = [a for a, m in cluster.calls if m == "Produce"]
    assert produces == [cluster.addresses[1], cluster.addresses[3]]


@pytest.mark.parametrize(
    "codes",
    [
        [ErrorCode.NOT_ENOUGH_REPLICAS],
        [ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NOT_LEADER_OR_FOLLOWER],
        [ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.LEADER_NOT_AVAILABLE],
    ],
)
def test_retriable_codes_are_retried_with_the_same_bytes(codes: list[ErrorCode]) -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.errors[("Produce", TP0)] = list(codes)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster) as p:
            return await send_all(p, [b"a", b"b"])

    assert [m.offset for m in run(main())] == [0, 1]
    attempts = [records for tp, records in cluster.produced]
    assert len(attempts) == len(codes) + 1
    assert all(a == attempts[0] for a in attempts)  # the same batch bytes every time


@pytest.mark.parametrize("code", [ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.INVALID_RECORD])
def test_fatal_codes_fail_the_batch_without_retrying(code: ErrorCode) -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.errors[("Produce", TP0)] = [code]

    async def main() -> None:
        async with producer(cluster) as p:
            fut = await p.send("t", b"a")
            with pytest.raises(ProduceError) as info:
                await fut
            assert info.value.code is code
            # The partition goes on with the next batch.
            assert (await p.send_and_wait("t", b"b")).offset == 0

    run(main())


def test_a_leaderless_partition_fails_its_records_after_delivery_timeout() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.partitions[TP0].leader = 9  # not a live broker

    async def main() -> None:
        p = producer(cluster, request_timeout_ms=50, delivery_timeout_ms=100)
        async with p:
            fut = await p.send("t", b"a")
            with pytest.raises(ProduceError) as info:
                await fut
            assert info.value.code is ErrorCode.REQUEST_TIMED_OUT
            assert "delivery_timeout_ms=100" in str(info.value)

    run(main())


def test_acks_zero_resolves_with_offset_minus_one() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[RecordMetadata]:
        async with producer(cluster, acks=0) as p:
            return await send_all(p, [b"a"])

    assert run(main())[0].offset == -1
    assert len(decode_records(cluster.records_in(TP0))) == 1


def test_unknown_topic_and_partition_fail_the_send() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> None:
        async with producer(cluster, max_block_ms=30) as p:
            with pytest.raises(UnknownTopicError):
                await p.partitions_for("nope")
            for fut in [await p.send("nope", b"a"), await p.send("t", b"a", partition=5)]:
                with pytest.raises(ProduceError) as info:
                    await fut
                assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    run(main())


def test_the_producer_counts_acknowledged_and_failed_records_as_kafkas_metrics() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.errors[("Produce", TP0)] = [ErrorCode.CORRUPT_MESSAGE]

    async def main() -> tuple[int, int]:
        async with producer(cluster, linger_ms=60000) as p:
            refused = [await p.send("t", b"x"), await p.send("t", b"y")]  # one batch, fatal
            await p.flush()
            assert all(isinstance(f.exception(), ProduceError) for f in refused)
            await p.send("t", b"a", partition=9)  # refused before buffering
            sent = [await p.send("t", v) for v in (b"b", b"c", b"d")]
            await p.flush()
            assert [f.result().offset for f in sent] == [0, 1, 2]
            return p.metrics.record_send_total, p.metrics.record_error_total

    assert run(main()) == (3, 3)


def test_flush_sends_without_waiting_for_linger() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> None:
        async with producer(cluster, linger_ms=60000, delivery_timeout_ms=120000) as p:
            fut = await p.send("t", b"a")
            await asyncio.wait_for(p.flush(), 2)
            assert fut.done() and fut.result().offset == 0

    run(main())


def test_consumer_follows_a_leader_move_and_an_epoch_bump() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[Any]:
        async with producer(cluster) as p, consumer(cluster) as c:
            c.assign([TP0])
            await send_all(p, [b"a"])
            got = await read_all(c, 1)
            cluster.move_leader(TP0, 3)
            await send_all(p, [b"b"])
            got += await read_all(c, 1)
            cluster.partitions[TP0].leader_epoch += 1  # re-elected: same leader, new epoch
            await send_all(p, [b"c"])
            return got + await read_all(c, 1)

    assert [r.value for r in run(main())] == [b"a", b"b", b"c"]
    assert ("broker3:9093", "Fetch") in cluster.calls
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in cluster.fetch_errors_sent
    assert ErrorCode.FENCED_LEADER_EPOCH in cluster.fetch_errors_sent


def test_consumer_resets_an_out_of_range_position_and_seeks() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> None:
        async with producer(cluster) as p:
            await send_all(p, [b"a", b"b", b"c"])
        async with consumer(cluster, auto_offset_reset="earliest") as c:
            c.assign([TP0])
            c.seek(TP0, 99)
            assert [r.offset for r in await read_all(c, 3)] == [0, 1, 2]
            c.seek(TP0, 1)
            assert [r.value for r in await read_all(c, 2)] == [b"b", b"c"]
            c.seek_to_end()
            assert await c.position(TP0) == 3
            c.seek_to_beginning([TP0])
            assert await c.position(TP0) == 0
            assert await c.end_offsets([TP0]) == {TP0: 3}
            assert await c.beginning_offsets([TP0]) == {TP0: 0}
            assert c.highwater(TP0) == 3
        async with consumer(cluster, auto_offset_reset="none") as c:
            c.assign([TP0])
            c.seek(TP0, 99)
            with pytest.raises(OffsetOutOfRange):
                await c.poll(200)

    run(main())


def test_consumer_latest_reset_skips_old_records() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)

    async def main() -> list[Any]:
        async with producer(cluster) as p, consumer(cluster, auto_offset_reset="latest") as c:
            await send_all(p, [b"old"])
            c.assign([TP0])
            assert await c.position(TP0) == 1
            await send_all(p, [b"new"])
            return await read_all(c, 1)

    assert [r.value for r in run(main())] == [b"new"]


def test_list_offsets_retries_offset_not_available_and_unknown_topics_raise() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.errors[("ListOffsets", TP0)] = [ErrorCode.OFFSET_NOT_AVAILABLE]

    async def main() -> None:
        async with consumer(cluster, default_api_timeout_ms=2000) as c:
            assert await c.end_offsets([TP0]) == {TP0: 0}
            with pytest.raises(UnknownTopicError):
                await c.partitions_for("nope", timeout_ms=30)
            with pytest.raises(UnknownTopicError):
                await c.end_offsets([TopicPartition("t", 4)])

    run(main())


def test_answers_for_partitions_unassigned_meanwhile_are_dropped() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 2)
    cluster.errors[("Fetch", TP0)] = [ErrorCode.OFFSET_OUT_OF_RANGE]

    async def main() -> list[Any]:
        async with producer(cluster) as p, consumer(cluster) as c:
            await send_all(p, [b"b"], partition=1)
            await c.partitions_for("t")
            c.assign([TP0])
            c.seek(TP0, 0)
            assert await c.poll(0) == []
            await asyncio.sleep(0)
            assert cluster.calls[-1] == ("broker1:9091", "Fetch")  # t-0's fetch is in flight
            c.assign([TP1])
            c.seek(TP1, 0)
            return await read_all(c, 1)

    assert [(r.partition, r.value) for r in run(main())] == [(1, b"b")]


def test_metadata_from_a_broker_that_knows_nothing_yet_is_ignored() -> None:
    cluster = FakeCluster()
    cluster.create_topic("t", 1)
    cluster.stale_metadata[1] = broker_pb2.MetadataResponse(controller_id=-1)

    async def main() -> RecordMetadata:
        bootstrap = [cluster.addresses[1], cluster.addresses[2]]
        async with Producer(bootstrap, channels=cluster, **FAST) as p:
            return await p.send_and_wait("t", b"a")

    assert run(main()).offset == 0
    assert ("broker2:9092", "Metadata") in cluster.calls
