"""The write jobs: the workload's records as a Spark DataFrame, written to the topic through
the minibroker data source, either in one batch or as a rate-paced stream.

Records are generated inside the tasks (mapInArrow over sequence numbers), so nothing but the
spec travels from the driver, and each task builds Arrow batches in one pass.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from loadgen.workload import WorkloadSpec, record
from minibroker.runtime.clock import monotonic_ms

# A streaming run stops once every record went out; this much longer than --duration it gives
# up waiting (a fault can hold a micro-batch for a leader election or a delivery timeout).
STREAM_GRACE_S = 120.0
TRIGGER_S = 1


class JobFailed(RuntimeError):
    """The Spark job failed; the message is the one line of Spark's error that says why."""


@dataclass(frozen=True)
class Sink:
    """Where and how the data source writes."""

    bootstrap: Sequence[str]
    topic: str
    acks: str
    ledger_dir: Path
    protocol: str = "grpc"  # kafka: bootstrap names the brokers' KAFKA listeners
    command_config: Path | None = None  # kafka: the client properties file (SASL, TLS)
    transactional_id: str | None = None  # kafka: produce in transactions (a prefix per run)
    transaction_records: int = 100
    ledger_on_driver: bool = False  # ledger.location driver (executors share no folder with it)

    def options(self) -> dict[str, str]:
        options = {
            "bootstrap": ",".join(self.bootstrap),
            "topic": self.topic,
            "acks": self.acks,
            "ledger.path": str(self.ledger_dir),
            "protocol": self.protocol,
            "ledger.location": "driver" if self.ledger_on_driver else "executor",
        }
        if self.command_config is not None:
            options["command.config"] = str(self.command_config)
        if self.transactional_id is not None:
            options["transactional.id"] = self.transactional_id
            options["transaction.records"] = str(self.transaction_records)
        return options


def output_schema(spec: WorkloadSpec) -> str:
    # The partition column only when the workload chooses: without it the producer's
    # partitioner (murmur2 of the key) decides, as for any Kafka producer.
    base = "key binary, value binary"
    return base if spec.partitions is None else base + ", partition int"


def generate(
    spec: WorkloadSpec, column: str, batches: Iterable[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    """Turn batches of sequence numbers (in `column`) into batches of records."""
    for batch in batches:
        keys, values, partitions = [], [], []
        for i in batch.column(column).to_pylist():
            key, value, partition = record(spec, i)
            keys.append(key)
            values.append(value)
            partitions.append(partition)
        arrays = [pa.array(keys, pa.binary()), pa.array(values, pa.binary())]
        names = ["key", "value"]
        if spec.partitions is not None:
            arrays.append(pa.array(partitions, pa.int32()))
            names.append("partition")
        yield pa.RecordBatch.from_arrays(arrays, names=names)


def records_frame(spark: SparkSession, spec: WorkloadSpec, tasks: int) -> DataFrame:
    """Records 0..spec.records-1 in `tasks` partitions of consecutive sequence numbers."""
    ids = spark.range(0, spec.records, numPartitions=tasks)
    return ids.mapInArrow(functools.partial(generate, spec, "id"), output_schema(spec))


def run_batch(spark: SparkSession, spec: WorkloadSpec, sink: Sink, tasks: int) -> None:
    try:
        records_frame(spark, spec, tasks).write.format("minibroker").options(**sink.options()).mode(
            "append"
        ).save()
    except Exception as exc:
        raise JobFailed(spark_error_line(exc)) from None


def run_stream(
    spark: SparkSession,
    spec: WorkloadSpec,
    sink: Sink,
    *,
    rate: int,
    tasks: int,
    checkpoint_dir: Path,
    deadline_s: float,
) -> int:
    """Stream spec.records records from Spark's rate source at `rate` per second; stop when
    all went out (or `deadline_s` from now passed). Returns how many the stream took in."""
    source = (
        spark.readStream.format("rate")
        .option("rowsPerSecond", rate)
        .option("numPartitions", tasks)
        .load()
    )
    # The rate source's `value` counts 0, 1, 2, ...: it is the sequence number. The filter
    # turns the endless source into exactly spec.records records.
    numbers = source.where(F.col("value") < spec.records).select(F.col("value").alias("i"))
    frame = numbers.mapInArrow(functools.partial(generate, spec, "i"), output_schema(spec))
    try:
        query = (
            frame.writeStream.format("minibroker")
            .options(**sink.options())
            .option("checkpointLocation", str(checkpoint_dir))
            # One micro-batch a second (R records each) rather than back to back: the load
            # is even, and between batches the query is idle and can stop without
            # interrupting a task.
            .trigger(processingTime=f"{TRIGGER_S} seconds")
            .start()
        )
        deadline_ms = monotonic_ms() + int(deadline_s * 1000)
        taken = _wait_for_rows(query, spec.records, deadline_ms)
        _wait_idle(query, deadline_ms)
        query.stop()
        failure = query.exception()
    except Exception as exc:
        raise JobFailed(spark_error_line(exc)) from None
    if failure is not None:
        raise JobFailed(spark_error_line(failure))
    return taken


def _wait_for_rows(query: Any, total: int, deadline_ms: int) -> int:
    """Until the finished micro-batches took in `total` rows, the query died, or the deadline."""
    rows: dict[int, int] = {}  # batch id -> input rows: progress updates repeat and expire
    while query.isActive and monotonic_ms() < deadline_ms:
        for progress in query.recentProgress:
            rows[progress["batchId"]] = progress["numInputRows"]
        if sum(rows.values()) >= total:
            break
        query.awaitTermination(0.5)
    return sum(rows.values())


def _wait_idle(query: Any, deadline_ms: int) -> None:
    """Until no micro-batch is running (or the deadline): stopping one midway interrupts its
    tasks, which pyspark reports with tracebacks of broken worker connections."""
    while query.isActive and query.status["isTriggerActive"] and monotonic_ms() < deadline_ms:
        time.sleep(0.05)


_ERROR_LINE = re.compile(r"(\w+(?:Error|Exception)): (.+)")


def spark_error_line(exc: BaseException) -> str:
    """The most telling line of a Spark error: the data source's own error if a task raised
    one, else the first `SomethingError: message` line, else the first line."""
    text = str(exc)
    found = [m for m in map(_ERROR_LINE.search, text.splitlines()) if m]
    for m in found:
        if m.group(1) == "MinibrokerSourceError":
            return m.group(2).strip()
    if found:
        return f"{found[0].group(1)}: {found[0].group(2).strip()}"
    first = next((line for line in text.splitlines() if line.strip()), type(exc).__name__)
    return first.strip()


def default_tasks(records: int, cores: int) -> int:
    """Producing tasks for a batch run: at least one per core, and at most ~200,000 records
    each so that a task failing late loses little and progress shows along the way."""
    return max(cores, -(-records // 200_000))
