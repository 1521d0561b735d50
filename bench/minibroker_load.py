"""minibroker's produce throughput and latency: 3 brokers, RF 3, process mode with ZooKeeper and a
controller, measured from one client process.

- **pre-built**: the same record batch bytes sent again and again with Produce (the broker's
  capacity: the client does no per-record work), `in_flight` requests per partition leader;
  acks=1 and acks=all, 100 B and 1 KiB records, batches of 1, 100 and 1000 records. Latency at
  peak (closed loop) and at half of the rate the cluster sustains replicated (the peak's
  records over the time until every follower held them; open loop, started once they caught
  up, latency measured from each request's scheduled send time, so a stall counts for every
  request it delays).
- **client-built**: the project's Producer fed one record at a time (`send`), batching with its
  defaults (linger 5 ms, 16 KiB batches): what an application gets end to end.
- **kafka confluent**: confluent-kafka (librdkafka) the same way, through the brokers' KAFKA
  listeners (bench/kafka_clients.py): the Kafka wire protocol next to the gRPC path.
- **end to end**: a Producer at half of its peak rate and a Consumer in the same process;
  each value carries its send time, latency = fetched − sent (a record is fetchable only once
  the high watermark passed it, so this is produce → replicated → visible → fetched).

The topic has one partition per broker (each broker leads one), min.insync.replicas 2.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import grpc

from bench.common import (
    CpuMeter,
    MissingDependency,
    Result,
    format_header,
    format_row,
    percentiles,
)
from bench.kafka_clients import confluent_built
from bench.load_cluster import (
    TOPIC,
    Cluster,
    add_topic,
    release_page_cache,
    request_counts,
    running_cluster,
    wait_replicated,
)
from bench.produce_loops import Targets, closed_loop, open_loop
from minibroker.client.consumer import Consumer
from minibroker.client.producer import Producer
from minibroker.client.record_future import RecordFuture
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition

RECORD_SIZES = (100, 1024)
BATCHES = (1, 100, 1000)
ACKS = (1, -1)
SYSTEM = "minibroker"
# The Producer cases time every 16th record: a callback on each would cost the client as much
# as the send itself (as Kafka's producer-perf-test, the latency is a sample).
LATENCY_SAMPLE = 16


def acks_name(acks: int) -> str:
    return "all" if acks == -1 else str(acks)


async def pre_built(
    cluster: Cluster,
    acks: int,
    record_bytes: int,
    records_per_batch: int,
    seconds: float,
    in_flight: int,
) -> tuple[Result, Result]:
    """The case at peak (closed loop) and at half of the peak's request rate (open loop)."""
    batch = build_batch(
        [NewRecord(None, b"v" * record_bytes)] * records_per_batch,
        base_timestamp=int(time.time() * 1000),
    )
    channels: dict[str, grpc.aio.Channel] = {}
    try:
        targets = Targets.open(channels, cluster, acks, batch)
        await closed_loop(targets, min(1.0, seconds), in_flight)  # warm-up: connections, caches
        leaders = list(channels.values())
        await wait_replicated(leaders, cluster.topic)
        meter = CpuMeter([p.pid for p in cluster.state.processes if p.pid] + [os.getpid()])
        before = request_counts(cluster.state)
        meter.start()
        messages, latencies, elapsed = await closed_loop(targets, seconds, in_flight)
        # The followers' backlog is part of the peak: with acks=1 the leaders acknowledge
        # faster than their followers copy, and a half-load phase started on that backlog
        # would measure the peak's leftovers (bench/profiles/half-load.md §5).
        replicated_s = elapsed + await wait_replicated(leaders, cluster.topic)
        cpu_s = meter.stop()
        after = request_counts(cluster.state)
        produces = after.get("Produce", 0) - before.get("Produce", 0)
        fetches = after.get("Fetch", 0) - before.get("Fetch", 0)
        per_request = fetches / produces if produces else None
        rf = "" if cluster.replicas == 3 else f"RF {cluster.replicas} "
        mode = f"pre-built {rf}acks={acks_name(acks)}"
        peak = Result(
            SYSTEM, mode, record_bytes, records_per_batch, messages, elapsed,
            *percentiles(latencies), load="peak", cpu_s=cpu_s, fetches_per_request=per_request,
            replicated_s=replicated_s,
        )  # fmt: skip
        # Half of the rate the cluster sustains replicated: above it (acks=1 at the leaders'
        # own peak) the followers fall further behind for as long as it lasts.
        await asyncio.to_thread(release_page_cache, cluster)  # the peak's pages
        meter.start()
        rate = messages / replicated_s / 2
        messages, latencies, elapsed = await open_loop(targets, seconds, rate)
        half = Result(
            SYSTEM, mode, record_bytes, records_per_batch, messages, elapsed,
            *percentiles(latencies), load="half", cpu_s=meter.stop(),
        )  # fmt: skip
        await wait_replicated(leaders, cluster.topic)  # the next case starts on a quiet cluster
    finally:
        for channel in channels.values():
            await channel.close()
    return peak, half


@dataclass(frozen=True)
class ProducerConfig:
    """The Producer settings a client-built case runs with."""

    name: str
    batch_size: int
    linger_ms: int
    buffer_memory: int = 32 << 20  # Kafka's default


# Kafka's defaults, and the throughput tuning: bigger batches, a little more linger, and a
# buffer of a few batches rather than 32 MiB. In Python every buffered record is a live future
# that each full garbage collection scans: a full 32 MiB buffer of 100 B records (~280,000)
# cost the client's core ~30%; 2 MiB keeps the pipeline as full (bench/profiles/producer.md).
DEFAULTS = ProducerConfig("defaults", batch_size=16384, linger_ms=5)
THROUGHPUT = ProducerConfig("batch 256K", batch_size=262144, linger_ms=10, buffer_memory=2 << 20)


async def client_built(
    cluster: Cluster,
    acks: int,
    record_bytes: int,
    seconds: float,
    rate_per_s: float | None = None,
    config: ProducerConfig = DEFAULTS,
) -> Result:
    """The Producer fed one record at a time, as fast as it takes them (or at `rate_per_s`);
    latency from `send` to the acknowledgement, of every LATENCY_SAMPLE-th record."""
    value = b"v" * record_bytes
    latencies: list[float] = []
    sent = 0
    async with Producer(
        cluster.bootstrap,
        acks=-1 if acks == -1 else 1,
        batch_size=config.batch_size,
        linger_ms=config.linger_ms,
        buffer_memory=config.buffer_memory,
    ) as producer:
        await producer.send_and_wait(TOPIC, value)  # metadata and connections
        started = time.perf_counter()
        deadline = started + seconds
        errors_before = producer.metrics.record_error_total

        def acked(at: float) -> Callable[[RecordFuture], None]:
            def done(future: RecordFuture) -> None:
                if future.exception() is None:
                    latencies.append((time.perf_counter() - at) * 1000)

            return done

        while (now := time.perf_counter()) < deadline:
            if rate_per_s is not None:
                delay = started + sent / rate_per_s - now
                if delay > 0:
                    await asyncio.sleep(delay)
            future = await producer.send(TOPIC, value)
            if sent % LATENCY_SAMPLE == 0:
                future.add_done_callback(acked(now))
            sent += 1
        await producer.flush()
        elapsed = time.perf_counter() - started
        # Counted by the producer, as Kafka's record-error-total: keeping every future to
        # look at it afterwards cost the client's one core more than the sends themselves.
        failed = producer.metrics.record_error_total - errors_before
        if failed:
            raise RuntimeError(f"{failed} of {sent} records failed")
    mode = f"client {config.name} acks={acks_name(acks)}"
    load = "peak" if rate_per_s is None else "half"
    return Result(SYSTEM, mode, record_bytes, 1, sent, elapsed, *percentiles(latencies), load=load)


async def end_to_end(
    cluster: Cluster, record_bytes: int, seconds: float, rate_per_s: float
) -> Result:
    """Producer (acks=all) at `rate_per_s` and a Consumer of every partition in one process:
    latency from `send` to the record's arrival in the consumer's poll."""
    stamp = struct.Struct(">d")
    padding = b"v" * (record_bytes - stamp.size)
    latencies: list[float] = []
    done = asyncio.Event()
    sent = 0

    async def consume(consumer: Consumer) -> None:
        while not done.is_set() or len(latencies) < sent:
            for record in await consumer.poll(200):
                if record.value is not None:
                    sent_at = stamp.unpack_from(record.value)[0]
                    latencies.append((time.perf_counter() - sent_at) * 1000)

    async with (
        Producer(cluster.bootstrap, acks=-1) as producer,
        Consumer(cluster.bootstrap, max_wait_ms=500) as consumer,
    ):
        partitions = await producer.partitions_for(TOPIC)
        consumer.assign([TopicPartition(TOPIC, p) for p in partitions])
        consumer.seek_to_end()
        await consumer.poll(0)
        reader = asyncio.create_task(consume(consumer))
        started = time.perf_counter()
        deadline = started + seconds
        while (now := time.perf_counter()) < deadline:
            delay = started + sent / rate_per_s - now
            if delay > 0:
                await asyncio.sleep(delay)
            await producer.send(TOPIC, stamp.pack(time.perf_counter()) + padding)
            sent += 1
        await producer.flush()
        elapsed = time.perf_counter() - started
        done.set()
        async with asyncio.timeout(30):
            await reader
    return Result(
        SYSTEM, "end-to-end acks=all", record_bytes, 1, sent, elapsed, *percentiles(latencies),
        load="half",
    )  # fmt: skip


def run(
    seconds: float = 3.0,
    in_flight: int = 8,
    record_sizes: Sequence[int] = RECORD_SIZES,
    batches: Sequence[int] = BATCHES,
    acks_levels: Sequence[int] = ACKS,
    client: bool = True,
    on_result: Callable[[Result], None] | None = None,
    kafka: bool = True,
) -> list[Result]:
    """Every case on one cluster; `on_result` sees each row as it lands."""
    results: list[Result] = []

    def add(result: Result) -> None:
        results.append(result)
        if on_result is not None:
            on_result(result)

    with running_cluster() as cluster:
        for record_bytes in record_sizes:
            for batch in batches:
                for acks in acks_levels:
                    for r in asyncio.run(
                        pre_built(cluster, acks, record_bytes, batch, seconds, in_flight)
                    ):
                        add(r)
        # The same requests to a topic without followers: what replication adds, in CPU/MB.
        single = add_topic(cluster.state, f"{TOPIC}-rf1", 3, 1)
        for acks in acks_levels:
            add(
                asyncio.run(
                    pre_built(single, acks, min(record_sizes), max(batches), seconds, in_flight)
                )[0]
            )
        if client:
            for config in (DEFAULTS, THROUGHPUT):
                for record_bytes in record_sizes:
                    for acks in acks_levels:
                        peak = asyncio.run(
                            client_built(cluster, acks, record_bytes, seconds, config=config)
                        )
                        add(peak)
                        if acks == -1:
                            half = peak.records_per_s / 2
                            release_page_cache(cluster)  # what the cases before wrote
                            add(
                                asyncio.run(
                                    client_built(cluster, acks, record_bytes, seconds, half, config)
                                )
                            )
            e2e_size = min(record_sizes)
            peak = next(
                r
                for r in results
                if r.mode == f"client {DEFAULTS.name} acks=all" and r.record_bytes == e2e_size
            )
            add(asyncio.run(end_to_end(cluster, e2e_size, seconds, peak.records_per_s / 2)))
        if kafka:  # the cluster is still up: same brokers, same topic
            for r in kafka_rows(cluster, record_sizes, acks_levels, seconds):
                add(r)
    return results


def kafka_rows(
    cluster: Cluster, record_sizes: Sequence[int], acks_levels: Sequence[int], seconds: float
) -> list[Result]:
    """confluent-kafka through the KAFKA listeners (bench/kafka_clients.py): peak, and half of
    it for acks=all; none, with a note, if confluent-kafka is missing."""
    rows: list[Result] = []
    try:
        for record_bytes in record_sizes:
            for acks in acks_levels:
                peak = confluent_built(cluster, acks, record_bytes, seconds)
                rows.append(peak)
                if acks == -1:
                    half = peak.records_per_s / 2
                    release_page_cache(cluster)  # what the cases before wrote
                    rows.append(confluent_built(cluster, acks, record_bytes, seconds, half))
    except MissingDependency as e:
        print(f"Kafka-protocol rows skipped: {e}", flush=True)
    return rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=3.0, help="per case (default 3)")
    parser.add_argument(
        "--in-flight", type=int, default=8, help="requests in flight per leader (default 8)"
    )
    parser.add_argument("--record-sizes", type=int, nargs="+", default=list(RECORD_SIZES))
    parser.add_argument("--batches", type=int, nargs="+", default=list(BATCHES))
    parser.add_argument("--acks", type=int, nargs="+", choices=ACKS, default=list(ACKS))
    parser.add_argument("--no-client", action="store_true", help="skip the Producer cases")
    parser.add_argument(
        "--no-kafka", action="store_true", help="skip confluent-kafka on the KAFKA listeners"
    )


def main(args: argparse.Namespace) -> list[Result]:
    print(
        f"minibroker: 3 brokers, RF 3, 3 partitions (one led by each broker), "
        f"min.insync.replicas 2; pre-built: {args.in_flight} requests in flight per leader; "
        f"{args.seconds:g} s per row",
        flush=True,
    )
    print(format_header(), flush=True)
    return run(
        seconds=args.seconds,
        in_flight=args.in_flight,
        record_sizes=args.record_sizes,
        batches=args.batches,
        acks_levels=args.acks,
        client=not args.no_client,
        kafka=not args.no_kafka,
        on_result=lambda r: print(format_row(r), flush=True),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add_arguments(parser)
    main(parser.parse_args())
