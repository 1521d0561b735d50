"""The Spark Python data source "minibroker": batch and streaming reads and writes of one topic,
shaped like Spark's Kafka source and sink, with a per-record ledger of every write.

Only the Spark-facing classes live here (options: source_options.py, client I/O: source_io.py).
Spark pickles readers, writers, partitions and commit messages to and from its Python workers,
so all of them are module-level classes holding plain values. Register the source with
`spark.dataSource.register(MinibrokerDataSource)`.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import Row
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    BinaryType,
    ByteType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructType,
)

from loadgen.kafka_io import produce_records_kafka
from loadgen.source_io import (
    OutRecord,
    ledger_bytes,
    produce_records,
    read_range,
    topic_offsets,
    write_ledger,
)
from loadgen.source_options import (
    EARLIEST,
    LATEST,
    MinibrokerSourceError,
    OffsetRange,
    ReadOptions,
    WriteOptions,
    check_within_log,
    parse_read_options,
    parse_write_options,
    plan_ranges,
    plan_stream_ranges,
    resolve_offsets,
)
from loadgen.write_commits import MinibrokerCommitMessage, log_commit, summarize

__all__ = [
    "MinibrokerCommitMessage",
    "MinibrokerDataSource",
    "MinibrokerSourceError",
    "summarize",
]

# What a read returns, as Spark's Kafka source does (minus headers).
READ_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp"
)
READ_COLUMNS = frozenset({"key", "value", "topic", "partition", "offset", "timestamp"})
# Spark sets this local property on every task of a streaming micro-batch.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


class MinibrokerDataSource(DataSource):
    """`spark.read/readStream.format("minibroker")` and `df.write/writeStream` to it; the
    options (bootstrap, topic, acks, linger.ms, ledger.path, ...) are listed in
    source_options.py."""

    @classmethod
    def name(cls) -> str:
        return "minibroker"

    def schema(self) -> str:
        return READ_SCHEMA

    def reader(self, schema: StructType) -> MinibrokerReader:
        return MinibrokerReader(parse_read_options(self.options), _check_read_schema(schema))

    def streamReader(self, schema: StructType) -> MinibrokerStreamReader:
        return MinibrokerStreamReader(parse_read_options(self.options), _check_read_schema(schema))

    def writer(self, schema: StructType, overwrite: bool) -> MinibrokerWriter:
        if overwrite:
            raise MinibrokerSourceError("a topic can only be appended to: use mode('append')")
        columns = WriteColumns.from_schema(schema)
        options = parse_write_options(self.options, has_topic_column=columns.topic is not None)
        return MinibrokerWriter(options, columns)

    def streamWriter(self, schema: StructType, overwrite: bool) -> MinibrokerStreamWriter:
        # overwrite is Spark's "complete" output mode: each micro-batch is simply appended.
        columns = WriteColumns.from_schema(schema)
        options = parse_write_options(self.options, has_topic_column=columns.topic is not None)
        return MinibrokerStreamWriter(options, columns)


# ---- writing -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class WriteColumns:
    """Positions of the input columns in each row (Spark's Kafka sink names)."""

    value: int
    key: int | None
    topic: int | None
    partition: int | None

    @classmethod
    def from_schema(cls, schema: StructType) -> WriteColumns:
        text = (BinaryType, StringType)
        integral = (ByteType, ShortType, IntegerType, LongType)
        wanted = {"value": text, "key": text, "topic": (StringType,), "partition": integral}
        found: dict[str, int] = {}
        for i, f in enumerate(schema.fields):
            if f.name in wanted:
                if not isinstance(f.dataType, wanted[f.name]):
                    raise MinibrokerSourceError(
                        f"column {f.name!r} has type {f.dataType.simpleString()}; expected "
                        + " or ".join(t().simpleString() for t in wanted[f.name])
                    )
                found[f.name] = i
        if "value" not in found:
            raise MinibrokerSourceError(
                f"writing needs a 'value' column (binary or string); columns: {schema.names}"
            )
        return cls(found["value"], found.get("key"), found.get("topic"), found.get("partition"))


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)  # bytearray, memoryview


def rows_to_records(
    rows: Iterable[Sequence[Any]], columns: WriteColumns, options: WriteOptions
) -> Iterator[OutRecord]:
    """The records of a write task's rows, Spark Rows or any sequences in the schema's column
    order (strings are sent as UTF-8)."""
    for row in rows:
        # Like Spark's Kafka sink, the topic option overrides a topic column.
        topic = options.topic or (row[columns.topic] if columns.topic is not None else None)
        if topic is None:
            raise MinibrokerSourceError(
                f"a row has a null 'topic' and option 'topic' is not set ({options.bootstrap})"
            )
        yield OutRecord(
            topic,
            None if columns.partition is None else row[columns.partition],
            None if columns.key is None else _as_bytes(row[columns.key]),
            _as_bytes(row[columns.value]),
        )


def _write_task(
    options: WriteOptions, columns: WriteColumns, rows: Iterator[Row], batch_label: str
) -> MinibrokerCommitMessage:
    """One Spark task: one producer for all its rows, then its ledger file."""
    ctx = TaskContext.get()
    partition_id = ctx.partitionId() if ctx is not None else 0
    attempt = str(ctx.taskAttemptId()) if ctx is not None else uuid.uuid4().hex
    records = rows_to_records(rows, columns, options)
    if options.protocol == "kafka":
        ledger = produce_records_kafka(records, options, partition_id)
    else:
        ledger = asyncio.run(produce_records(records, options))
    ledger_file = name = data = None
    if options.ledger_path is not None:
        name = f"ledger-{batch_label}-{partition_id}-{attempt}.parquet"
        if options.ledger_on_driver:
            data = ledger_bytes(ledger)
        else:
            ledger_file = write_ledger(ledger, options.ledger_path, name)
    return MinibrokerCommitMessage(
        partition_id=partition_id,
        sent=len(ledger),
        acked=ledger.acked,
        failed=len(ledger) - ledger.acked,
        errors=ledger.error_counts(),
        ledger_file=ledger_file,
        first_send_ms=ledger.first_send_ms(),
        last_ack_ms=ledger.last_ack_ms(),
        ledger_name=name if data is not None else None,
        ledger_data=data,
    )


class MinibrokerWriter(DataSourceWriter):
    """A batch write (`df.write...mode("append").save()`): one producer per Spark task."""

    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Row]) -> MinibrokerCommitMessage:
        return _write_task(self.options, self.columns, iterator, "batch")

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log_commit(self.options, "batch", messages, "committed")

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        # Nothing to undo (acknowledged records stay in the topic); the ledgers stay too.
        log_commit(self.options, "batch", messages, "aborted")


class MinibrokerStreamWriter(DataSourceStreamWriter):
    """A streaming write: each micro-batch as a batch write, ledgers named by its batch id."""

    def __init__(self, options: WriteOptions, columns: WriteColumns) -> None:
        self.options = options
        self.columns = columns

    def write(self, iterator: Iterator[Row]) -> MinibrokerCommitMessage:
        ctx = TaskContext.get()
        batch_id = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
        return _write_task(self.options, self.columns, iterator, batch_id or "stream")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log_commit(self.options, str(batchId), messages, "committed")

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log_commit(self.options, str(batchId), messages, "aborted")


# ---- reading -----------------------------------------------------------------------------------


def _check_read_schema(schema: StructType) -> StructType:
    unknown = [name for name in schema.names if name not in READ_COLUMNS]
    if unknown:
        raise MinibrokerSourceError(
            f"the minibroker source has no column {unknown[0]!r} (it has {sorted(READ_COLUMNS)})"
        )
    return schema


class OffsetRangePartition(InputPartition):
    """One Spark task's share of a read: an OffsetRange of one topic partition."""

    def __init__(self, rng: OffsetRange) -> None:
        super().__init__(rng)


def _read(options: ReadOptions, schema: StructType, partition: InputPartition) -> Iterator[Any]:
    # Spark plans a single InputPartition(None) when a batch read has no ranges at all.
    if not isinstance(partition.value, OffsetRange):
        return iter(())
    arrow_schema: pa.Schema = to_arrow_schema(schema, timezone="UTC")
    return read_range(options, partition.value, arrow_schema)


class MinibrokerReader(DataSourceReader):
    """A batch read of the offsets fixed when the read is planned."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        """One partition per topic partition with records between the offsets asked for;
        "latest" is each high watermark now, when the read is planned."""
        opts = self.options
        offsets = asyncio.run(topic_offsets(opts))
        args = (offsets.partitions, offsets.beginning, offsets.latest)
        start = resolve_offsets(opts.starting, *args, default=EARLIEST)
        end = resolve_offsets(opts.ending, *args, default=LATEST)
        check_within_log(opts.topic, "startingOffsets", start, offsets.beginning, offsets.latest)
        check_within_log(opts.topic, "endingOffsets", end, offsets.beginning, offsets.latest)
        return [OffsetRangePartition(r) for r in plan_ranges(opts.topic, start, end)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, self.schema, partition)


class MinibrokerStreamReader(DataSourceStreamReader):
    """Offsets are {"<partition>": offset} dicts, which Spark checkpoints as JSON."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def initialOffset(self) -> dict[str, int]:
        offsets = asyncio.run(topic_offsets(self.options))
        start = resolve_offsets(
            self.options.starting,
            offsets.partitions,
            offsets.beginning,
            offsets.latest,
            default=EARLIEST,
        )
        return {str(p): o for p, o in start.items()}

    def latestOffset(self, start: dict[str, int], limit: Any) -> dict[str, int]:
        """Each partition's high watermark now. `limit` is always ReadAllAvailable: the source
        sets no other default read limit."""
        offsets = asyncio.run(topic_offsets(self.options, with_beginning=False))
        return {str(p): offsets.latest[p] for p in offsets.partitions}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> list[InputPartition]:
        return [OffsetRangePartition(r) for r in plan_stream_ranges(self.options.topic, start, end)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return _read(self.options, self.schema, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing to do: the source keeps no state; Spark's checkpoint holds the offsets."""
