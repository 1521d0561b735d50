"""kafka-delete-records: records before an offset deleted per partition (Kafka 2.6's
DeleteRecordsCommand, docs/kafka-tools-2.6.md §5) with DeleteRecords through the brokers'
Kafka listeners; offset -1 means the high watermark. As in Kafka, partitions that fail are
lines on stdout and the exit status is still 0."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from minibroker.kafkatools.common import ToolError, ToolParser, admin, run

TOOL = "kafka-delete-records"


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Delete records of the given partitions down to the specified offset.")
    p.add_argument("--bootstrap-server", required=True, metavar="HOST:PORT")
    p.add_argument("--offset-json-file", required=True, type=Path, metavar="FILE")
    p.add_argument("--command-config", type=Path, metavar="FILE")
    return p


def parse_offsets(text: str) -> list[tuple[str, int, int]]:
    """DeleteRecordsCommand.parseOffsetJsonStringWithoutDedup, then the duplicate check."""
    try:
        doc = json.loads(text)
    except ValueError:
        raise ToolError("The input string is not a valid JSON") from None
    if doc.get("version", 1) != 1:
        raise ToolError(f"Not supported version field value {doc.get('version')}")
    if "partitions" not in doc:
        raise ToolError("Missing partitions field")
    out = [(str(p["topic"]), int(p["partition"]), int(p["offset"])) for p in doc["partitions"]]
    seen = [(t, p) for t, p, _ in out]
    duplicates = sorted({f"{t}-{p}" for t, p in seen if seen.count((t, p)) > 1})
    if duplicates:
        raise ToolError(
            f"Offset json file contains duplicate topic partitions: {','.join(duplicates)}"
        )
    return out


def _body(argv: list[str]) -> int:
    from kafka import TopicPartition
    from kafka.errors import KafkaError

    args = build_parser().parse_args(argv)
    try:
        wanted = parse_offsets(args.offset_json_file.read_text())
    except OSError as exc:
        raise ToolError(f"--offset-json-file {args.offset_json_file}: {exc}") from None
    client = admin(args.bootstrap_server, args.command_config)
    try:
        print("Executing records delete operation")
        print("Records delete operation completed:")
        for topic, partition, offset in wanted:
            tp = TopicPartition(topic, partition)
            try:
                got: Any = client.delete_records({tp: offset})
                low = got[tp]["low_watermark"] if isinstance(got[tp], dict) else got[tp]
                print(f"partition: {topic}-{partition}\tlow_watermark: {low}")
            except KafkaError as exc:
                print(f"partition: {topic}-{partition}\terror: {type(exc).__name__}: {exc}")
    finally:
        client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    return run(TOOL, _body, argv)
