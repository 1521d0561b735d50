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


VERIFY = "transaction.partition.verification.enable"
SMALL_TXN = 10  # records a transaction in the verification rows: its cost is per transaction


def transaction_rounds(cluster: Cluster, seconds: float) -> tuple[int, float, list[float]]:
    """Back-to-back transactions of SMALL_TXN records spread over every partition (so each
    has a first transactional batch on every leader, the one a verifying leader asks the
    coordinator about): (transactions, elapsed s, each one's begin-to-committed ms)."""
    from confluent_kafka import Producer

    producer: Any = Producer(
        {"bootstrap.servers": kafka_bootstrap(cluster), "acks": "all", "linger.ms": 0,
         "transactional.id": f"bench-verify-{uuid.uuid4().hex[:6]}"}
    )  # fmt: skip
    producer.init_transactions(60)
    value = b"v" * RECORD_BYTES
    rounds: list[float] = []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        at = time.perf_counter()
        producer.begin_transaction()
        for i in range(SMALL_TXN):
            producer.produce(cluster.topic, value, partition=i % 3)
        producer.commit_transaction(60)
        rounds.append((time.perf_counter() - at) * 1000)
    return len(rounds), time.perf_counter() - started, rounds


def verification_cost(seconds: float = 10.0) -> Section:
    """The same transactions on a cluster with transaction.partition.verification.enable off
    (Kafka 2.6) and one with it on (KIP-890 part 1), one after the other."""
    rows, rates = [], {}
    for on in (False, True):
        overrides = (f"{VERIFY}=true",) if on else ()
        with running_cluster(overrides=overrides) as cluster:
            transactional(cluster, SMALL_TXN, 1.0)  # the coordinator loaded, the path warm
            n, elapsed, rounds = transaction_rounds(cluster, seconds)
        p50, p99, _ = percentiles(rounds)
        rates[on] = n / elapsed
        rows.append((f"{VERIFY}={'true' if on else 'false'}", f"{n / elapsed:,.1f}",
                     f"{p50 or 0:.1f}", f"{p99 or 0:.1f}"))  # fmt: skip
    body = (
        f"confluent-kafka, acks=all, transactions of {SMALL_TXN} records of {RECORD_BYTES} B "
        f"over 3 partitions (each led by another broker), back to back, {seconds:g} s a row, a "
        "cluster each. With verification on, every partition's first batch in a transaction "
        "waits for one question to the coordinator.\n\n"
        + md_table(["brokers", "transactions/s", "p50 ms", "p99 ms"], rows)
        + f"\n\nratio on/off (transactions/s): {rates[True] / rates[False]:.2f}"
    )
    figures = {"transactions.verification.off": rates[False],
               "transactions.verification.on": rates[True]}  # fmt: skip
    return Section("What KIP-890 verification costs a transaction", body, figures)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds a row (10)")
    parser.add_argument(
        "--verification", action="store_true",
        help=f"only the {VERIFY} rows: the same transactions with it off and on",
    )  # fmt: skip


def main(args: argparse.Namespace) -> int:
    section = verification_cost(args.seconds) if args.verification else measure(args.seconds)
    print(f"### {section.title}\n{section.markdown}")
    return 0
