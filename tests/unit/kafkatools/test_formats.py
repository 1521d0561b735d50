"""Kafka's tools' parsing and output rules, without a cluster: the topic regex (Whitelist),
--replica-assignment, --add-config's brackets, the consumer-groups tables' widths and the
console consumer's line (docs/kafka-tools-2.6.md)."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from minibroker.kafkatools import group_tables
from minibroker.kafkatools.common import ToolError
from minibroker.kafkatools.configs import parse_add_config
from minibroker.kafkatools.console_consumer import line_of
from minibroker.kafkatools.delete_records import parse_offsets
from minibroker.kafkatools.topic_sources import PartitionDescription, TopicDescription
from minibroker.kafkatools.topics import describe_lines, parse_assignment, topic_matcher


def test_topic_regex_is_kafkas_whitelist() -> None:
    m = topic_matcher("'orders, invoices'")
    assert m.fullmatch("orders") and m.fullmatch("invoices") and not m.fullmatch("orders2")
    assert topic_matcher("a.b").fullmatch("axb")  # a regular expression, as in Kafka
    with pytest.raises(ToolError, match="invalid regex"):
        topic_matcher("(")


def test_replica_assignment_and_add_config() -> None:
    assert parse_assignment("1:2,2:3") == {0: [1, 2], 1: [2, 3]}
    with pytest.raises(ToolError):
        parse_assignment("1:x")
    assert parse_add_config("a=1,b=[x,y],c = 3") == {"a": "1", "b": "x,y", "c": "3"}
    with pytest.raises(ToolError, match='"key=val"'):
        parse_add_config("nokey")


def test_describe_lines_and_reports() -> None:
    t = TopicDescription(
        "t",
        (PartitionDescription(0, 1, (1, 2), (1, 2)), PartitionDescription(1, None, (2, 1), (2,))),
        (("min.insync.replicas", "2"),), 2, False, frozenset({1, 2}),
    )  # fmt: skip
    assert describe_lines([t], None, False) == [
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 2\tConfigs: min.insync.replicas=2",
        "\tTopic: t\tPartition: 0\tLeader: 1\tReplicas: 1,2\tIsr: 1,2",
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,1\tIsr: 2",
    ]
    assert describe_lines([t], "under_replicated_partitions", False) == [
        "\tTopic: t\tPartition: 1\tLeader: none\tReplicas: 2,1\tIsr: 2"
    ]
    assert len(describe_lines([t], "unavailable_partitions", False)) == 1
    assert len(describe_lines([t], "at_min_isr_partitions", False)) == 1
    assert describe_lines([t], None, True) == [describe_lines([t], None, False)[0]]


@dataclass
class TP:
    topic: str
    partition: int

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))


def test_consumer_group_tables_have_kafkas_widths() -> None:
    assigned = {"assigned_partitions": [{"topic": "t", "partitions": [1, 0]}]}
    member = {"member_id": "m-1", "client_host": "/127.0.0.1", "client_id": "c",
              "member_assignment": assigned}  # fmt: skip
    committed = {TP("t", 0): 3, TP("u", 0): 1}
    rows = group_tables.offsets_rows("g", [member], committed, {TP("t", 0): 5})
    text = group_tables.offsets_table(rows)
    lines = text.split("\n")
    assert lines[0] == ""
    assert lines[1] == (
        "GROUP           TOPIC           PARTITION  CURRENT-OFFSET  LOG-END-OFFSET  "
        "LAG             CONSUMER-ID     HOST            CLIENT-ID"
    )
    assert lines[2].split() == ["g", "t", "0", "3", "5", "2", "m-1", "/127.0.0.1", "c"]
    assert lines[3].split() == ["g", "t", "1", "-", "-", "-", "m-1", "/127.0.0.1", "c"]
    assert lines[4].split() == ["g", "u", "0", "1", "-", "-", "-", "-", "-"]
    members = group_tables.members_table("g", [member], verbose=True).split("\n")
    assert members[1].endswith("#PARTITIONS     ASSIGNMENT")
    assert members[2].endswith("2               t(0,1)")
    assert (
        group_tables.states_table([("g", "Stable")])
        == "GROUP           STATE\ng               Stable"
    )
    reset = group_tables.reset_table({"g": {TP("t", 0): 7}}).split("\n")
    assert reset[2] == f"{'g':<30} {'t':<30} {'0':<10} {'7':<15}"


@dataclass
class Record:
    key: bytes | None
    value: bytes | None
    partition: int = 0
    timestamp: int = 5
    timestamp_type: int = 0


def test_console_consumer_line_is_the_default_formatter() -> None:
    r = Record(b"k", b"v")
    assert line_of(r, {}) == b"v\n"
    assert line_of(r, {"print.key": "true", "key.separator": ":"}) == b"k:v\n"
    assert line_of(r, {"print.timestamp": "TRUE", "print.key": "true"}) == b"CreateTime:5\tk\tv\n"
    assert line_of(Record(None, None), {"print.key": "true", "print.partition": "true"}) == (
        b"null\tnull\t0\n"
    )


def test_delete_records_offsets_file() -> None:
    assert parse_offsets('{"partitions": [{"topic": "t", "partition": 0, "offset": -1}]}') == [
        ("t", 0, -1)
    ]
    with pytest.raises(ToolError, match="duplicate"):
        parse_offsets('{"partitions": [{"topic": "t", "partition": 0, "offset": 1},'
                      ' {"topic": "t", "partition": 0, "offset": 2}]}')  # fmt: skip
    with pytest.raises(ToolError, match="not a valid JSON"):
        parse_offsets("{")


def test_the_console_producer_takes_acks_as_kafka_does() -> None:
    """`--producer-property acks=all` (Kafka's usual spelling) and `--request-required-acks -1`
    both mean acks=all; a word where a number belongs is one clear error."""
    import pytest

    from minibroker.kafkatools.common import ToolError
    from minibroker.kafkatools.console_producer import build_parser, producer_settings

    def settings(*argv: str) -> dict[str, object]:
        args = build_parser().parse_args(["--bootstrap-server", "h:1", "--topic", "t", *argv])
        return producer_settings(args)

    assert settings("--producer-property", "acks=all")["acks"] == "all"
    assert settings("--request-required-acks", "-1")["acks"] == "all"
    assert settings()["acks"] == 1  # Kafka's console producer default
    assert settings("--producer-property", "linger.ms=5")["linger_ms"] == 5
    with pytest.raises(ToolError, match="linger.ms=soon: not a number"):
        settings("--producer-property", "linger.ms=soon")
    with pytest.raises(ToolError, match="acks=most"):
        settings("--producer-property", "acks=most")
