"""BENCHMARKS.md's section on the Kafka wire protocol: confluent-kafka through the brokers'
KAFKA listeners next to the project's gRPC Producer, row by row, from the same run."""

from __future__ import annotations

from collections.abc import Sequence

from bench.common import Result, Section, md_table
from bench.kafka_clients import MODE

GRPC_MODE = "client defaults"


def _cell(r: Result | None) -> list[str]:
    if r is None:
        return ["–", "–"]
    p99 = "–" if r.p99_ms is None else f"{r.p99_ms:.1f}"
    return [f"{r.records_per_s:,.0f}", p99]


def kafka_section(mb: Sequence[Result]) -> list[Section]:
    """The comparison, with figures `kafka.<acks>.<bytes>.<load>.{records_per_s,p99_ms}`."""
    kafka = [r for r in mb if r.mode.startswith(MODE)]
    if not kafka:
        return []
    rows, figures = [], {}
    for k in kafka:
        acks = k.mode.rsplit("acks=", 1)[1]
        grpc = next(
            (
                r
                for r in mb
                if r.mode == f"{GRPC_MODE} acks={acks}"
                and (r.record_bytes, r.load) == (k.record_bytes, k.load)
            ),
            None,
        )
        rows.append([f"acks={acks}", f"{k.record_bytes}", k.load, *_cell(k), *_cell(grpc)])
        key = f"kafka.{acks}.{k.record_bytes}.{k.load}"
        figures[f"{key}.records_per_s"] = k.records_per_s
        if k.p99_ms is not None:
            figures[f"{key}.p99_ms"] = k.p99_ms
    table = md_table(
        ["acks", "record B", "load", "Kafka protocol records/s", "p99 ms", "gRPC Producer "
         "records/s", "p99 ms"],
        rows,
    )  # fmt: skip
    text = f"""The same cluster and topic as above. *Kafka protocol*: confluent-kafka (librdkafka
2.x) through the brokers' KAFKA listeners (Kafka's wire protocol, broker/kafka/), fed one
record at a time with librdkafka's defaults (linger 5 ms, batches up to 1 MB, idempotence off);
latency from `produce` to the delivery report, every 16th record. *gRPC Producer*: the
project's Producer with Kafka's defaults (the *client defaults* rows above). *half*: an open
loop at half of that client's own peak. Both are one client process on the cores the three
brokers use.

{table}
"""
    title = "Kafka wire protocol: confluent-kafka next to the gRPC Producer"
    return [Section(title, text, figures)]
