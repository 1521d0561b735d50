"""BENCHMARKS.md's Kafka-protocol section from hand-made rows: each confluent-kafka row beside
the gRPC Producer's row of the same acks, record size and load."""

from __future__ import annotations

from bench.common import Result
from bench.kafka_report import kafka_section


def row(mode: str, size: int, load: str, records: int, p99: float | None) -> Result:
    return Result("minibroker", mode, size, 1, records, 2.0, 1.0, p99, load=load)


def test_each_kafka_row_sits_beside_the_grpc_producers_row() -> None:
    mb = [
        row("client defaults acks=all", 100, "peak", 200_000, 40.0),
        row("client defaults acks=all", 100, "half", 100_000, 9.0),
        row("kafka confluent acks=all", 100, "peak", 300_000, 30.0),
        row("kafka confluent acks=all", 100, "half", 150_000, 7.5),
        row("kafka confluent acks=1", 100, "peak", 400_000, None),
    ]
    (section,) = kafka_section(mb)
    lines = section.markdown.splitlines()
    assert "| acks=all | 100 | peak | 150,000 | 30.0 | 100,000 | 40.0 |" in lines
    assert "| acks=all | 100 | half | 75,000 | 7.5 | 50,000 | 9.0 |" in lines
    assert "| acks=1 | 100 | peak | 200,000 | – | – | – |" in lines
    assert section.figures["kafka.all.100.half.p99_ms"] == 7.5
    assert section.figures["kafka.1.100.peak.records_per_s"] == 200_000
    assert "kafka.1.100.peak.p99_ms" not in section.figures


def test_no_kafka_rows_no_section() -> None:
    assert kafka_section([row("client defaults acks=all", 100, "peak", 1, 1.0)]) == []
