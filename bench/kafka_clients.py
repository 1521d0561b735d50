"""Produce through the brokers' KAFKA listeners with confluent-kafka (librdkafka), next to the
gRPC Producer on the same cluster: records fed one at a time with librdkafka's defaults
(linger 5 ms, 1 MB batches, idempotence off), at peak (as fast as it takes them) and, for
acks=all, at half of that rate; latency from `produce` to the delivery report, of every
LATENCY_SAMPLE-th record.

confluent-kafka is a test dependency (`.venv`); without it the rows are skipped with a note.
"""

from __future__ import annotations

import time
from typing import Any

from bench.common import MissingDependency, Result, percentiles
from bench.load_cluster import Cluster

LATENCY_SAMPLE = 16
MODE = "kafka confluent"


def kafka_bootstrap(cluster: Cluster) -> str:
    """Every broker's KAFKA listener (process mode gives each broker one)."""
    ports = [(b.host, b.kafka_port) for b in cluster.state.by_role("broker") if b.kafka_port]
    if not ports:
        raise RuntimeError("the benchmark cluster's brokers have no KAFKA listener")
    return ",".join(f"{host}:{port}" for host, port in ports)


def _producer(
    cluster: Cluster, acks: int, bootstrap: str | None = None, config: dict[str, str] | None = None
) -> Any:
    try:
        from confluent_kafka import Producer
    except ImportError:
        raise MissingDependency(
            "confluent-kafka is not installed: bash scripts/bootstrap.sh installs it"
        ) from None
    return Producer(
        {
            "bootstrap.servers": bootstrap or kafka_bootstrap(cluster),
            "acks": "all" if acks == -1 else "1",
            **(config or {}),
        }
    )


def confluent_built(
    cluster: Cluster,
    acks: int,
    record_bytes: int,
    seconds: float,
    rate_per_s: float | None = None,
    *,
    bootstrap: str | None = None,
    config: dict[str, str] | None = None,
    mode: str = MODE,
) -> Result:
    """confluent-kafka's Producer fed one record at a time for `seconds`, as fast as it takes
    them (a full queue is waited out in poll) or at `rate_per_s`, then flushed. `bootstrap`
    and `config` (security settings) default to the KAFKA listeners in the clear."""
    producer = _producer(cluster, acks, bootstrap, config)
    value = b"v" * record_bytes
    latencies: list[float] = []
    failed: list[object] = []

    def sampled(at: float) -> Any:
        def delivered(err: object, _msg: object) -> None:
            if err is None:
                latencies.append((time.perf_counter() - at) * 1000)
            else:
                failed.append(err)

        return delivered

    def counted(err: object, _msg: object) -> None:
        if err is not None:
            failed.append(err)

    # Metadata, a connection to every leader and replication running on every partition:
    # a cluster's first acks=all produce of a partition can wait out a follower's fetch backoff
    # (~1 s after start-up), which one sampled record would carry into the p99.
    for partition in sorted(cluster.leaders):
        producer.produce(cluster.topic, value, partition=partition)
    producer.flush(30)
    sent = 0
    started = time.perf_counter()
    deadline = started + seconds
    while (now := time.perf_counter()) < deadline:
        if rate_per_s is not None:
            delay = started + sent / rate_per_s - now
            if delay > 0:
                # Serves delivery reports while it waits. librdkafka counts whole milliseconds:
                # a wait under one was poll(0), which spun a core at 1,000 records/s and more
                # (the client took 0.9 of the machine's 2 cores from the brokers); records
                # that fall due meanwhile go out together, as producer-perf-test's throttle does.
                producer.poll(max(delay, 0.001))
                continue
        report = sampled(now) if sent % LATENCY_SAMPLE == 0 else counted
        try:
            producer.produce(cluster.topic, value, on_delivery=report)
        except BufferError:  # the local queue is full: let librdkafka drain it
            producer.poll(0.001)
            continue
        producer.poll(0)
        sent += 1
    left = producer.flush(60)
    elapsed = time.perf_counter() - started
    if left or failed:
        raise RuntimeError(f"{left + len(failed)} of {sent} records failed: {failed[:3]}")
    mode = f"{mode} acks={'all' if acks == -1 else acks}"
    load = "peak" if rate_per_s is None else "half"
    return Result(
        "minibroker", mode, record_bytes, 1, sent, elapsed, *percentiles(latencies), load=load
    )
