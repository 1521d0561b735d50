"""The minibroker data source's client I/O, run inside Spark tasks and the planner: one Producer
per write task that records every record's fate in a ledger, ListOffsets for planning, and a
Consumer reading one offset range. Plain functions over plain values; no pyspark here.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.parquet as pq

from loadgen.source_options import (
    EARLIEST,
    MinibrokerSourceError,
    OffsetRange,
    ReadOptions,
    WriteOptions,
)
from minibroker.client import (
    ClientError,
    Consumer,
    ConsumerRecord,
    NoBrokerAvailable,
    OffsetOutOfRange,
    Producer,
    RecordFuture,
    RecordMetadata,
    TopicPartition,
    UnknownTopicError,
)
from minibroker.core.errors import ErrorCode
from minibroker.runtime.clock import monotonic_ms, now_ms

LEDGER_SCHEMA = pa.schema(
    [
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("key", pa.binary()),
        ("value_sha256", pa.string()),
        ("send_ms", pa.int64()),
        ("ack_ms", pa.int64()),
        ("error", pa.string()),
    ]
)

# Sending never suspends while metadata is cached and the buffer has room, so the producer's
# sender task would not run until the whole input is buffered; yield to it this often.
_YIELD_EVERY = 64


class OutRecord(NamedTuple):
    """One row to produce; partition None lets the producer's partitioner choose."""

    topic: str
    partition: int | None
    key: bytes | None
    value: bytes | None


@dataclass
class Ledger:
    """Every record a task handed to its producer, column by column, in the order their fates
    became known. A record is acknowledged exactly when its error is None (offset -1 then
    only with acks=0); a failed one has offset -1 and the partition it asked for, or -1."""

    topic: list[str] = field(default_factory=list)
    partition: list[int] = field(default_factory=list)
    offset: list[int] = field(default_factory=list)
    key: list[bytes | None] = field(default_factory=list)
    value_sha256: list[str | None] = field(default_factory=list)
    send_ms: list[int] = field(default_factory=list)
    ack_ms: list[int] = field(default_factory=list)
    error: list[str | None] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.topic)

    def add(
        self,
        record: OutRecord,
        digest: str | None,
        send_ms: int,
        ack_ms: int,
        outcome: RecordMetadata | BaseException,
    ) -> None:
        self.topic.append(record.topic)
        self.key.append(record.key)
        self.value_sha256.append(digest)
        self.send_ms.append(send_ms)
        self.ack_ms.append(ack_ms)
        if isinstance(outcome, RecordMetadata):
            self.partition.append(outcome.partition)
            self.offset.append(outcome.offset)
            self.error.append(None)
        else:
            self.partition.append(-1 if record.partition is None else record.partition)
            self.offset.append(-1)
            self.error.append(error_name(outcome))

    @property
    def acked(self) -> int:
        return self.error.count(None)

    def error_counts(self) -> dict[str, int]:
        return dict(Counter(e for e in self.error if e is not None))

    def first_send_ms(self) -> int | None:
        return min(self.send_ms, default=None)

    def last_ack_ms(self) -> int | None:
        acked = (t for t, e in zip(self.ack_ms, self.error, strict=True) if e is None)
        return max(acked, default=None)

    def table(self) -> pa.Table:
        return pa.Table.from_pydict(
            {name: getattr(self, name) for name in LEDGER_SCHEMA.names}, schema=LEDGER_SCHEMA
        )


def value_digest(value: bytes | None) -> str | None:
    """The ledger's fingerprint of a value (a null value has none)."""
    return None if value is None else hashlib.sha256(value).hexdigest()


def error_name(exc: BaseException) -> str:
    """A failed record's error as Kafka's code name (the producer fails futures with them), or
    the name an error carries for the ledger (`ledger_name`: loadgen/kafka_io.py's)."""
    code = getattr(exc, "code", None)
    if isinstance(code, ErrorCode):
        return code.name
    named = getattr(exc, "ledger_name", None)
    return named if isinstance(named, str) else type(exc).__name__


class _Recorder:
    """Moves each record into the ledger when its future resolves (that moment is its ack_ms),
    so a task holds only the records still in flight, not one future per row."""

    def __init__(self) -> None:
        self.ledger = Ledger()
        self.pending = 0
        self._idle = asyncio.Event()

    def track(self, record: OutRecord, send_ms: int, fut: RecordFuture) -> None:
        self.pending += 1
        digest = value_digest(record.value)
        fut.add_done_callback(functools.partial(self._done, record, digest, send_ms))

    def _done(
        self,
        record: OutRecord,
        digest: str | None,
        send_ms: int,
        fut: RecordFuture,
    ) -> None:
        outcome: RecordMetadata | BaseException
        if fut.cancelled():
            outcome = ClientError("the send was cancelled")
        else:
            outcome = fut.exception() or fut.result()
        self.ledger.add(record, digest, send_ms, now_ms(), outcome)
        self.pending -= 1
        if self.pending == 0:
            self._idle.set()

    async def wait_all(self) -> None:
        if self.pending:
            self._idle.clear()
            await self._idle.wait()


async def produce_records(records: Iterable[OutRecord], options: WriteOptions) -> Ledger:
    """Send every record through one producer, flush, and return the ledger. Raises only when
    a topic cannot be written at all (no broker answers, or the topic does not exist)."""
    recorder = _Recorder()
    checked: set[str] = set()
    async with Producer(
        options.bootstrap,
        acks=options.acks,
        linger_ms=options.linger_ms,
        batch_size=options.batch_size,
        request_timeout_ms=options.request_timeout_ms,
        delivery_timeout_ms=options.delivery_timeout_ms,
        max_block_ms=options.max_block_ms,
    ) as producer:
        for i, record in enumerate(records):
            if record.topic not in checked:
                await _check_topic(producer, record.topic, options)
                checked.add(record.topic)
            send_ms = now_ms()
            fut = await producer.send(
                record.topic, record.value, key=record.key, partition=record.partition
            )
            recorder.track(record, send_ms, fut)
            if i % _YIELD_EVERY == _YIELD_EVERY - 1:
                await asyncio.sleep(0)
        await producer.flush()
        # flush() returns when every future is resolved; their callbacks may still be queued.
        await recorder.wait_all()
    return recorder.ledger


async def _check_topic(producer: Producer, topic: str, options: WriteOptions) -> None:
    try:
        await producer.partitions_for(topic)
    except NoBrokerAvailable as exc:
        raise MinibrokerSourceError(
            f"cannot reach any broker at {options.bootstrap} to write topic {topic!r} "
            f"(tried for max.block.ms={options.max_block_ms}): {exc}"
        ) from None
    except UnknownTopicError:
        raise MinibrokerSourceError(
            f"topic {topic!r} does not exist at {options.bootstrap} (not in the brokers' "
            f"metadata after max.block.ms={options.max_block_ms}); create it first"
        ) from None


def write_ledger(ledger: Ledger | pa.Table, directory: str, filename: str) -> str:
    """Write the ledger as one Parquet file; it appears under its name only when complete
    (readers of the directory skip names starting with a dot)."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, filename)
    partial = os.path.join(directory, f".{filename}.tmp")
    pq.write_table(ledger if isinstance(ledger, pa.Table) else ledger.table(), partial)
    os.replace(partial, path)
    return path


def ledger_bytes(ledger: Ledger) -> bytes:
    """The ledger as a compressed Arrow IPC stream: how a task sends it to the driver."""
    table = ledger.table()
    sink = pa.BufferOutputStream()
    options = pa.ipc.IpcWriteOptions(compression="zstd")
    with pa.ipc.new_stream(sink, table.schema, options=options) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def ledger_from_bytes(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.py_buffer(data)).read_all()


@dataclass(frozen=True)
class TopicOffsets:
    """A topic's partitions with their log start offsets and high watermarks."""

    partitions: list[int]
    beginning: dict[int, int]
    latest: dict[int, int]


async def topic_offsets(options: ReadOptions, *, with_beginning: bool = True) -> TopicOffsets:
    """Look up the topic and ListOffsets latest (and earliest, unless not wanted: then
    `beginning` is empty) for all its partitions."""
    topic, bootstrap = options.topic, options.bootstrap
    async with Consumer(
        bootstrap,
        request_timeout_ms=options.request_timeout_ms,
        default_api_timeout_ms=options.max_block_ms,
        isolation_level="read_committed" if options.read_committed else "read_uncommitted",
    ) as consumer:
        try:
            partitions = await consumer.partitions_for(topic, timeout_ms=options.max_block_ms)
            tps = [TopicPartition(topic, p) for p in partitions]
            beginning = await consumer.beginning_offsets(tps) if with_beginning else {}
            latest = await consumer.end_offsets(tps)
        except NoBrokerAvailable as exc:
            raise MinibrokerSourceError(
                f"cannot reach any broker at {bootstrap} to read topic {topic!r}: {exc}"
            ) from None
        except UnknownTopicError:
            raise MinibrokerSourceError(
                f"topic {topic!r} does not exist at {bootstrap} (not in the brokers' metadata "
                f"after max.block.ms={options.max_block_ms})"
            ) from None
        except ClientError as exc:
            raise MinibrokerSourceError(
                f"cannot list the offsets of topic {topic!r} at {bootstrap}: {exc}"
            ) from None
    return TopicOffsets(
        partitions,
        {tp.partition: o for tp, o in beginning.items()},
        {tp.partition: o for tp, o in latest.items()},
    )


def read_range(
    options: ReadOptions, rng: OffsetRange, schema: pa.Schema
) -> Iterator[pa.RecordBatch]:
    """The records of [rng.start, rng.end) as Arrow batches with `schema`'s columns (any of
    key, value, topic, partition, offset, timestamp). Fails if the range left the log, or if
    nothing arrives for poll.timeout.ms while records are still due."""
    tp = TopicPartition(rng.topic, rng.partition)
    # One loop for the whole generator: the consumer's channels and tasks belong to it, and
    # Spark pulls batches between our polls.
    with asyncio.Runner() as runner:
        consumer = runner.run(_open_consumer(options, tp, rng.start))
        try:
            position = runner.run(_position(consumer, tp, options))
            last_progress = monotonic_ms()
            while position < rng.end:
                records = runner.run(_poll(consumer, tp, options, position))
                wanted = [r for r in records if rng.start <= r.offset < rng.end]
                if wanted:
                    yield _arrow_batch(wanted, schema)
                new_position = runner.run(_position(consumer, tp, options))
                if new_position > position:
                    position, last_progress = new_position, monotonic_ms()
                elif monotonic_ms() - last_progress > options.poll_timeout_ms:
                    raise MinibrokerSourceError(
                        f"{tp} at {options.bootstrap}: no records at offset {position} for "
                        f"poll.timeout.ms={options.poll_timeout_ms}; the range ends at {rng.end}"
                    )
        finally:
            runner.run(consumer.close())


async def _open_consumer(options: ReadOptions, tp: TopicPartition, start: int) -> Consumer:
    # auto_offset_reset="none": a range that retention removed fails instead of reading other
    # offsets silently (Spark's failOnDataLoss); without it the read goes on at the log start.
    consumer = Consumer(
        options.bootstrap,
        auto_offset_reset="none" if options.fail_on_data_loss else "earliest",
        request_timeout_ms=options.request_timeout_ms,
        default_api_timeout_ms=options.max_block_ms,
        isolation_level="read_committed" if options.read_committed else "read_uncommitted",
    )
    consumer.assign([tp])
    if start == EARLIEST:
        consumer.seek_to_beginning([tp])
    else:
        consumer.seek(tp, start)
    return consumer


async def _position(consumer: Consumer, tp: TopicPartition, options: ReadOptions) -> int:
    try:
        return await consumer.position(tp)
    except ClientError as exc:
        raise MinibrokerSourceError(f"{tp} at {options.bootstrap}: {exc}") from None


async def _poll(
    consumer: Consumer, tp: TopicPartition, options: ReadOptions, position: int
) -> list[ConsumerRecord]:
    try:
        return await consumer.poll(timeout_ms=min(1000, options.poll_timeout_ms))
    except OffsetOutOfRange as exc:
        raise MinibrokerSourceError(
            f"{tp} at {options.bootstrap}: offset {position} is no longer in the log ({exc})"
        ) from None
    except ClientError as exc:
        raise MinibrokerSourceError(f"{tp} at {options.bootstrap}: {exc}") from None


def _arrow_batch(records: list[ConsumerRecord], schema: pa.Schema) -> pa.RecordBatch:
    arrays = [pa.array(_column(f.name, records), type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _column(name: str, records: list[ConsumerRecord]) -> list[Any]:
    if name == "timestamp":
        # Spark's timestamps are microseconds since the epoch, in UTC.
        return [r.timestamp * 1000 for r in records]
    return [getattr(r, name) for r in records]
