"""After a load run: compare the producers' ledger with what the topic holds (Kafka's
ProduceConsumeValidate). A Spark job reads the ledger Parquet files and the topic through the
minibroker data source, up to each partition's high watermark, and counts the anomalies.

The one failure is an acknowledged record that is not at the offset it was acknowledged at,
unless it lies below its partition's log start offset once the topic was read (retention or
DeleteRecords removed it: `expired`, counted apart); duplicates (producer retries),
reordering and records that made it without an answer are reported, since Kafka without
idempotence allows them.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from loadgen.workload import SEQUENCE_DIGITS


@dataclass(frozen=True)
class Verification:
    """Counts of one run. `missing` are acknowledged records not found at (partition, offset)
    with the same value digest; `moved` is how many of them are in the topic elsewhere.
    `duplicates` counts extra copies; `out_of_order` records that come after a higher
    sequence number of the same key, producer task and partition; `unacknowledged_present`
    records in the topic that no ledger row completed (they failed, or are foreign).
    `unconfirmed` rows were sent with acks=0 (no offset): `unconfirmed_lost` of them are not
    in the topic, which acks=0 allows."""

    sent: int
    acked: int
    failed: int
    topic_records: int
    missing: int
    moved: int
    duplicates: int
    out_of_order: int
    unacknowledged_present: int
    unconfirmed: int = 0
    unconfirmed_lost: int = 0
    expired: int = 0  # acknowledged, below the log start offset: removed by retention
    # --transactional: read with read_committed, every committed record once (no duplicate,
    # no gap) and nothing of an aborted or failed transaction visible; None otherwise.
    exactly_once: bool | None = None

    @property
    def ok(self) -> bool:
        return self.missing == 0 and self.exactly_once is not False

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}


def starting_offsets_option(topic: str, offsets: Mapping[int, int]) -> str:
    """Spark's Kafka JSON for where this run's records start, or "earliest" for a new topic
    (records produced before the run are not this run's and would count as unacknowledged)."""
    if not any(offsets.values()):
        return "earliest"
    return json.dumps({topic: {str(p): o for p, o in sorted(offsets.items())}})


def read_ledger(spark: SparkSession, ledger_dir: Path, on_driver: bool = False) -> DataFrame:
    """Every ledger row, with the file it came from: one file per producing task. `on_driver`:
    the folder is the driver's alone (ledger.location driver: executors elsewhere cannot read
    it), so the driver reads it and hands Spark the rows."""
    if not on_driver:
        return spark.read.parquet(str(ledger_dir)).withColumn("task", F.col("_metadata.file_path"))
    tables = []
    for path in sorted(ledger_dir.glob("ledger-*.parquet")):
        table = pq.read_table(path)
        tables.append(table.append_column("task", pa.array([str(path)] * table.num_rows)))
    return spark.createDataFrame(pa.concat_tables(tables))


def read_topic(
    spark: SparkSession,
    bootstrap: Sequence[str],
    topic: str,
    starting: Mapping[int, int],
    read_committed: bool = False,
) -> DataFrame:
    """The topic's records from `starting` to the high watermark, as (partition, offset, key,
    digest, seq), materialised once so that every count sees the same snapshot."""
    raw = (
        spark.read.format("minibroker")
        .option("bootstrap", ",".join(bootstrap))
        .option("topic", topic)
        .option("startingOffsets", starting_offsets_option(topic, starting))
        # Retention may remove the start of the range while it is read: go on from the log
        # start (what was removed is below the log start read afterwards: not checked).
        .option("failOnDataLoss", "false")
        .option("isolation.level", "read_committed" if read_committed else "read_uncommitted")
        .load()
    )
    # The sequence number is the value's first digits (loadgen.workload); foreign values give
    # null and take no part in the order check.
    seq = F.expr(f"try_cast(cast(substring(value, 1, {SEQUENCE_DIGITS}) as string) as bigint)")
    records = raw.select(
        "partition",
        "offset",
        "key",
        F.sha2(F.col("value"), 256).alias("digest"),
        seq.alias("seq"),
    )
    return records.localCheckpoint(eager=True)


def verify(
    spark: SparkSession,
    *,
    bootstrap: Sequence[str],
    topic: str,
    ledger_dir: Path,
    starting: Mapping[int, int],
    log_starts: Callable[[], Mapping[int, int]] | None = None,
    transactional: bool = False,
    ledger_on_driver: bool = False,
) -> Verification:
    """Run the comparison (see the module docstring); `starting` holds each partition's high
    watermark from before the run; `log_starts` asks each partition's log start offset, after
    the topic was read."""
    ledger = read_ledger(spark, ledger_dir, ledger_on_driver).where(F.col("topic") == topic)
    records = read_topic(spark, bootstrap, topic, starting, read_committed=transactional)
    found = compare(ledger, records, log_starts() if log_starts is not None else None)
    if not transactional:
        return found
    exact = found.missing == found.moved == found.duplicates == found.unacknowledged_present == 0
    return dataclasses.replace(found, exactly_once=exact)


def compare(
    ledger: DataFrame, records: DataFrame, log_starts: Mapping[int, int] | None = None
) -> Verification:
    """The counts from ledger rows (partition, offset, value_sha256, error, task) and topic
    records (partition, offset, key, digest, seq); acknowledged rows below their partition's
    log start offset (`log_starts`) count as expired, not missing.

    Few Spark jobs, as each costs about a second on these machines: the ledger is read once
    and counted in one aggregation, the missing rows materialised once."""
    ledger = ledger.localCheckpoint(eager=True)
    completed = ledger.where(F.col("error").isNull()).select(
        "partition", "offset", F.lower("value_sha256").alias("digest"), "task"
    )
    start = F.lit(0)
    for partition, offset in (log_starts or {}).items():
        start = F.when(F.col("partition") == partition, F.lit(offset)).otherwise(start)
    ok, at = F.col("error").isNull(), F.col("offset")
    counts = ledger.agg(
        F.count(F.lit(1)).alias("sent"),
        F.count(F.when(ok & (at >= 0) & (at >= start), 1)).alias("acked"),
        F.count(F.when(~ok, 1)).alias("failed"),
        F.count(F.when(ok & (at < 0), 1)).alias("unconfirmed"),
        F.count(F.when(ok & (at >= 0) & (at < start), 1)).alias("expired"),
    ).first()
    assert counts is not None
    acked = completed.where((F.col("offset") >= 0) & (F.col("offset") >= start))
    unconfirmed = completed.where(F.col("offset") < 0)
    missing = acked.join(records, ["partition", "offset", "digest"], "left_anti").localCheckpoint(
        eager=True
    )
    return Verification(
        sent=int(counts["sent"]),
        acked=int(counts["acked"]),
        failed=int(counts["failed"]),
        topic_records=records.count(),
        missing=missing.count(),
        moved=missing.join(records.select("digest"), "digest", "left_semi").count(),
        duplicates=_duplicates(records),
        out_of_order=_out_of_order(records, completed),
        unacknowledged_present=records.join(completed, "digest", "left_anti").count(),
        unconfirmed=int(counts["unconfirmed"]),
        unconfirmed_lost=unconfirmed.join(records, "digest", "left_anti").count(),
        expired=int(counts["expired"]),
    )


def _duplicates(records: DataFrame) -> int:
    copies = records.groupBy("digest").count().where(F.col("count") > 1)
    extra = copies.agg(F.sum(F.col("count") - 1).alias("extra")).first()
    return int(extra["extra"] or 0) if extra is not None else 0


def _out_of_order(records: DataFrame, completed: DataFrame) -> int:
    """Records whose sequence number is below the one before them in offset order, among the
    records one producer task sent for one key to one partition.

    Per task, because concurrent tasks interleave their keys legitimately; first copies only,
    because a retried duplicate repeats an old sequence number by design.
    """
    first_copy = Window.partitionBy("digest").orderBy("offset")
    firsts = (
        records.where(F.col("seq").isNotNull())
        .withColumn("copy", F.row_number().over(first_copy))
        .where(F.col("copy") == 1)
    )
    tasks = completed.select("digest", "task").dropDuplicates(["digest"])
    by_producer = Window.partitionBy("task", "partition", "key").orderBy("offset")
    ordered = firsts.join(tasks, "digest").withColumn("previous", F.lag("seq").over(by_producer))
    return int(ordered.where(F.col("previous") > F.col("seq")).count())
