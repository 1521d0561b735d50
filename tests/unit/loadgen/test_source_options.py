"""The data source's option parsing and offset planning (pure), its row conversion, ledger and
commit summary; no Spark session, no cluster."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

from loadgen.datasource import WriteColumns, rows_to_records
from loadgen.source_io import LEDGER_SCHEMA, Ledger, OutRecord, ledger_bytes
from loadgen.source_options import (
    EARLIEST,
    LATEST,
    MinibrokerSourceError,
    OffsetRange,
    check_within_log,
    parse_offset_spec,
    parse_read_options,
    parse_write_options,
    plan_ranges,
    plan_stream_ranges,
    resolve_offsets,
)
from loadgen.write_commits import MinibrokerCommitMessage, ledger_written, summarize
from minibroker.client import ProduceError, RecordMetadata
from minibroker.core.errors import ErrorCode

BOOT = "127.0.0.1:9092,127.0.0.1:9093"


def test_write_options_defaults_and_case_insensitive_names() -> None:
    opts = parse_write_options({"Bootstrap": BOOT, "TOPIC": "t"}, has_topic_column=False)
    assert (opts.bootstrap, opts.topic, opts.acks, opts.linger_ms) == (BOOT, "t", -1, 5)
    assert (opts.batch_size, opts.request_timeout_ms, opts.delivery_timeout_ms) == (
        16384,
        30000,
        120000,
    )
    assert opts.ledger_path is None
    opts = parse_write_options(
        {"bootstrap": BOOT, "acks": "0", "linger.ms": "0", "ledger.path": "/x"},
        has_topic_column=True,
    )
    assert (opts.topic, opts.acks, opts.linger_ms, opts.ledger_path) == (None, 0, 0, "/x")


@pytest.mark.parametrize(
    ("options", "has_topic_column", "message"),
    [
        ({"topic": "t"}, False, "'bootstrap' is required"),
        ({"bootstrap": "nohostport", "topic": "t"}, False, "host:port"),
        ({"bootstrap": BOOT}, False, "set option 'topic' or give the DataFrame a 'topic' column"),
        ({"bootstrap": BOOT, "topic": "t", "acks": "2"}, False, "'acks' must be"),
        ({"bootstrap": BOOT, "topic": "t", "linger.ms": "x"}, False, "must be an integer"),
        ({"bootstrap": BOOT, "topic": "t", "batch.size": "0"}, False, "must be >= 1"),
        ({"bootstrap": BOOT, "topic": "t", "delivery.timeout.ms": "100"}, False, "delivery"),
        ({"bootstrap": BOOT, "topic": "t", "transactional.id": "x"}, False, "needs protocol kafka"),
        (
            {
                "bootstrap": BOOT,
                "topic": "t",
                "transactional.id": "x",
                "protocol": "kafka",
                "acks": "1",
            },
            False,
            "needs acks all",
        ),
    ],
)
def test_write_options_refused(
    options: dict[str, str], has_topic_column: bool, message: str
) -> None:
    with pytest.raises(MinibrokerSourceError, match=message):
        parse_write_options(options, has_topic_column=has_topic_column)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("earliest", "earliest"),
        (" LATEST ", "latest"),
        ('{"t": {"0": 23, "1": -2, "2": -1}}', {0: 23, 1: EARLIEST, 2: LATEST}),
        ('{"t": {}}', {}),
    ],
)
def test_offset_specs(raw: str, expected: Any) -> None:
    assert parse_offset_spec(raw, "startingOffsets", "t") == expected


@pytest.mark.parametrize(
    "raw", ["soon", '{"other": {"0": 1}}', '{"t": {"x": 1}}', '{"t": {"0": -3}}', "[1]"]
)
def test_bad_offset_specs(raw: str) -> None:
    with pytest.raises(MinibrokerSourceError, match="startingOffsets"):
        parse_offset_spec(raw, "startingOffsets", "t")


def test_read_options() -> None:
    opts = parse_read_options({"bootstrap": BOOT, "topic": "t"})
    assert (opts.starting, opts.ending) == ("earliest", "latest")
    with pytest.raises(MinibrokerSourceError, match="'topic' is required"):
        parse_read_options({"bootstrap": BOOT})
    with pytest.raises(MinibrokerSourceError, match="cannot be 'earliest'"):
        parse_read_options({"bootstrap": BOOT, "topic": "t", "endingOffsets": "earliest"})


BEGIN = {0: 0, 1: 5, 2: 0}
HW = {0: 30, 1: 40, 2: 0}


@pytest.mark.parametrize(
    ("spec", "default", "expected"),
    [
        ("earliest", LATEST, {0: 0, 1: 5, 2: 0}),
        ("latest", EARLIEST, {0: 30, 1: 40, 2: 0}),
        ({0: 7}, EARLIEST, {0: 7, 1: 5, 2: 0}),
        ({0: 7, 1: LATEST}, LATEST, {0: 7, 1: 40, 2: 0}),
    ],
)
def test_resolve_offsets(spec: Any, default: int, expected: dict[int, int]) -> None:
    assert resolve_offsets(spec, [0, 1, 2], BEGIN, HW, default=default) == expected


def test_resolve_offsets_refuses_a_partition_the_topic_lacks() -> None:
    with pytest.raises(MinibrokerSourceError, match="partition 3"):
        resolve_offsets({3: 0}, [0, 1, 2], BEGIN, HW, default=EARLIEST)


def test_batch_plan_skips_empty_ranges_and_refuses_inverted_ones() -> None:
    start, end = {0: 5, 1: 40, 2: 0}, {0: 12, 1: 40, 2: 0}
    assert plan_ranges("t", start, end) == [OffsetRange("t", 0, 5, 12)]
    with pytest.raises(MinibrokerSourceError, match="starting offset 13 is after ending offset 12"):
        plan_ranges("t", {0: 13}, {0: 12})
    check_within_log("t", "endingOffsets", end, BEGIN, HW)
    with pytest.raises(MinibrokerSourceError, match="partition 1 is 4, outside its log"):
        check_within_log("t", "startingOffsets", {1: 4}, BEGIN, HW)


def test_stream_plan() -> None:
    # Partition 2 is new since the start (read from its log start); 1 went backwards.
    start, end = {"0": 3, "1": 9}, {"0": 8, "1": 7, "2": 4}
    assert plan_stream_ranges("t", start, end) == [
        OffsetRange("t", 0, 3, 8),
        OffsetRange("t", 2, EARLIEST, 4),
    ]
    assert plan_stream_ranges("t", end, end) == []


def test_ledger_columns_and_summary() -> None:
    ledger = Ledger()
    ok = OutRecord("t", None, b"k", b"v")
    bad = OutRecord("t", 2, None, None)
    ledger.add(ok, hashlib.sha256(b"v").hexdigest(), 10, 15, RecordMetadata("t", 1, 7, 10))
    ledger.add(bad, None, 11, 40, ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS, "x"))
    table = ledger.table()
    assert table.schema.equals(LEDGER_SCHEMA)
    assert table.to_pylist()[1] == {
        "topic": "t",
        "partition": 2,
        "offset": -1,
        "key": None,
        "value_sha256": None,
        "send_ms": 11,
        "ack_ms": 40,
        "error": "NOT_ENOUGH_REPLICAS",
    }
    assert (ledger.acked, ledger.first_send_ms(), ledger.last_ack_ms()) == (1, 10, 15)
    a = MinibrokerCommitMessage(0, 2, 1, 1, {"NOT_ENOUGH_REPLICAS": 1}, "/l/a", 10, 15)
    b = MinibrokerCommitMessage(1, 3, 3, 0, {}, None, 5, 50)
    assert summarize([a, b, None]) == {
        "tasks": 2,
        "tasks_failed": 1,
        "sent": 5,
        "acked": 4,
        "failed": 1,
        "errors": {"NOT_ENOUGH_REPLICAS": 1},
        "ledger_files": ["/l/a"],
        "first_send_ms": 5,
        "last_ack_ms": 50,
    }


def test_a_ledger_sent_to_the_driver_is_written_there(tmp_path: Path) -> None:
    where = {"ledger.path": str(tmp_path), "ledger.location": "driver"}
    opts = parse_write_options({"bootstrap": BOOT, "topic": "t", **where}, has_topic_column=False)
    assert opts.ledger_on_driver
    ledger = Ledger()
    record = OutRecord("t", None, b"k", b"v")
    ledger.add(record, hashlib.sha256(b"v").hexdigest(), 10, 15, RecordMetadata("t", 1, 7, 10))
    sent = MinibrokerCommitMessage(0, 1, 1, 0, {}, None, 10, 15, "ledger-3-0-9.parquet",
                                   ledger_bytes(ledger))  # fmt: skip
    landed = ledger_written(opts, sent)
    assert isinstance(landed, MinibrokerCommitMessage) and landed.ledger_data is None
    assert landed.ledger_file == str(tmp_path / "ledger-3-0-9.parquet")
    assert pq.read_table(landed.ledger_file).equals(ledger.table())
    assert ledger_written(opts, None) is None  # a failed task sent nothing
    with pytest.raises(MinibrokerSourceError, match="'ledger.location' must be executor or driver"):
        parse_write_options({"bootstrap": BOOT, "topic": "t", "ledger.location": "nfs"},
                            has_topic_column=False)  # fmt: skip


def test_rows_become_records_like_sparks_kafka_sink() -> None:
    schema = StructType(
        [
            StructField("partition", IntegerType()),
            StructField("value", StringType()),
            StructField("topic", StringType()),
            StructField("key", BinaryType()),
        ]
    )
    columns = WriteColumns.from_schema(schema)
    assert columns == WriteColumns(value=1, key=3, topic=2, partition=0)
    rows = [(None, "v1", "a", b"k"), (2, None, None, None)]
    from_column = parse_write_options({"bootstrap": BOOT}, has_topic_column=True)
    with pytest.raises(MinibrokerSourceError, match="null 'topic'"):
        list(rows_to_records(rows, columns, from_column))
    # The option wins over the column.
    fixed = parse_write_options({"bootstrap": BOOT, "topic": "t"}, has_topic_column=True)
    assert list(rows_to_records(rows, columns, fixed)) == [
        OutRecord("t", None, b"k", b"v1"),
        OutRecord("t", 2, None, None),
    ]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ([StructField("key", StringType())], "needs a 'value' column"),
        ([StructField("value", IntegerType())], "column 'value' has type int"),
        ([StructField("value", StringType()), StructField("partition", StringType())], "int"),
    ],
)
def test_write_schemas_refused(fields: list[StructField], message: str) -> None:
    with pytest.raises(MinibrokerSourceError, match=message):
        WriteColumns.from_schema(StructType(fields))


def test_transactional_writes_and_read_committed_reads() -> None:
    w = parse_write_options(
        {"bootstrap": BOOT, "topic": "t", "protocol": "kafka", "transactional.id": "run-7",
         "transaction.records": "50"},
        has_topic_column=False,
    )  # fmt: skip
    assert (w.transactional_id, w.transaction_records) == ("run-7", 50)
    r = parse_read_options({"bootstrap": BOOT, "topic": "t", "isolation.level": "READ_COMMITTED"})
    assert r.read_committed
    assert not parse_read_options({"bootstrap": BOOT, "topic": "t"}).read_committed
    with pytest.raises(MinibrokerSourceError, match="isolation.level"):
        parse_read_options({"bootstrap": BOOT, "topic": "t", "isolation.level": "serializable"})
