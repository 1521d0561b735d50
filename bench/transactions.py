"""`python -m bench transactions [--seconds 10]`: what transactions cost (issue 29). On one
cluster (3 brokers, 1 controller, Kafka's timings, topic `bench`: 3 partitions, RF 3,
min.insync.replicas 2), confluent-kafka producers with acks=all and 100 B records at peak:
plain (idempotence off), idempotent, and transactional with transactions of 100 and of 1,000
records (begin, produce, commit; a record counts once its transaction committed). Latency:
for plain and idempotent rows from `produce` to the delivery report (every 16th record); for
transactional rows the commit's, per transaction."""

from __future__ import annotations

import argparse
import time
import uuid
from typing import Any

from bench.common import Result, Section, md_table, percentiles
from bench.kafka_clients import confluent_built, kafka_bootstrap
from bench.load_cluster import Cluster, running_cluster

RECORD_BYTES = 100
TRANSACTION_SIZES = (100, 1000)


def transactional(cluster: Cluster, per_txn: int, seconds: float) -> Result:
    """Transactions of `per_txn` records for `seconds`: the committed records per second."""
    from confluent_kafka import Producer

    producer: Any = Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all",
         "transactional.id": f"bench-{per_txn}-{uuid.uuid4().hex[:6]}"}
    )  # fmt: skip
    producer.init_transactions(60)
    value = b"v" * RECORD_BYTES
    commits: list[float] = []
    committed = 0
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        producer.begin_transaction()
        sent = 0
        while sent < per_txn:
            try:
                producer.produce(cluster.topic, value)
            except BufferError:
                producer.poll(0.001)
                continue
            producer.poll(0)
            sent += 1
        at = time.perf_counter()
        producer.commit_transaction(60)
        commits.append((time.perf_counter() - at) * 1000)
        committed += per_txn
    elapsed = time.perf_counter() - started
    mode = f"transactional, {per_txn:,} records a transaction"
    return Result("minibroker", mode, RECORD_BYTES, 1, committed, elapsed, *percentiles(commits))


def measure(seconds: float = 10.0) -> Section:
    with running_cluster() as cluster:
        results = [
            confluent_built(cluster, -1, RECORD_BYTES, seconds, mode="plain"),
            confluent_built(
                cluster,
                -1,
                RECORD_BYTES,
                seconds,
                mode="idempotent",
                config={"enable.idempotence": "true"},
            ),  # fmt: skip
            *(transactional(cluster, n, seconds) for n in TRANSACTION_SIZES),
        ]
    rows = [
        (r.mode, f"{r.records / r.seconds:,.0f}",
         "-" if r.p50_ms is None else f"{r.p50_ms:.1f}",
         "-" if r.p99_ms is None else f"{r.p99_ms:.1f}")
        for r in results
    ]  # fmt: skip
    body = (
        f"confluent-kafka, acks=all, {RECORD_BYTES} B records at peak, {seconds:g} s a row, one "
        "cluster. Latency: delivery report (plain, idempotent) or commit (transactional).\n\n"
        + md_table(["producer", "records/s", "p50 ms", "p99 ms"], rows)
    )
    figures = {f"transactions.{r.mode}": r.records / r.seconds for r in results}
    return Section("What transactions cost (next to idempotent and plain acks=all)", body, figures)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds a row (10)")


def main(args: argparse.Namespace) -> int:
    section = measure(args.seconds)
    print(f"### {section.title}\n{section.markdown}")
    return 0
