"""The minibroker Spark data source against a real 3-broker cluster: batch and streaming writes
with their ledgers, batch reads (whole topic and offset sub-ranges), a streaming read, and the
errors a user sees for a missing topic or an unreachable cluster."""

from __future__ import annotations

import asyncio
import glob
import hashlib
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from loadgen.source_io import LEDGER_SCHEMA
from minibroker import localcluster
from minibroker.client import Producer, RecordMetadata
from minibroker.runtime.clock import monotonic_ms
from tests.integration import spark_fixtures
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration
spark = spark_fixtures.spark  # this module's Spark session

Key = tuple[str, int, int, str]  # topic, partition, offset, sha256 of the value


def create_topic(c: Cluster, topic: str) -> str:
    c.cli(
        "topics", "create", topic, "--partitions", "3", "--replication-factor", "3",
        "--config", "min.insync.replicas=2", "--wait",
    )  # fmt: skip
    return ",".join(p.address for p in c.state.processes if p.name.startswith("broker-"))


def produce(bootstrap: str, topic: str, values: list[tuple[int, bytes]]) -> list[RecordMetadata]:
    """(partition, value) records, each acknowledged by acks=all."""

    async def run() -> list[RecordMetadata]:
        async with Producer(bootstrap, acks="all") as p:
            futures = [await p.send(topic, v, partition=part) for part, v in values]
            return [await f for f in futures]

    return asyncio.run(run())


def sha(value: bytes | None) -> str:
    assert value is not None
    return hashlib.sha256(value).hexdigest()


def read_topic(spark: SparkSession, bootstrap: str, topic: str, **options: str) -> DataFrame:
    return (
        spark.read.format("minibroker")
        .option("bootstrap", bootstrap)
        .option("topic", topic)
        .options(**options)
        .load()
    )


def read_keys(df: DataFrame) -> list[Key]:
    return [(r.topic, r.partition, r.offset, sha(r.value)) for r in df.collect()]


def ledger_rows(directory: Path) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    for path in sorted(glob.glob(str(directory / "ledger-*.parquet"))):
        table = pq.read_table(path)
        assert table.schema.equals(LEDGER_SCHEMA), path
        rows += table.to_pylist()
    return rows


def summaries(directory: Path) -> list[dict[str, Any]]:
    paths = sorted(glob.glob(str(directory / "_summary-*.json")))
    return [json.loads(Path(p).read_text()) for p in paths]


@pytest.fixture
def ledger_dir(tmp_path: Path) -> Path:
    return tmp_path / "ledger"


def test_batch_write_with_ledger_then_read_back(
    c: Cluster, spark: SparkSession, ledger_dir: Path
) -> None:
    bootstrap = create_topic(c, "t")
    # Keys cycle over 50 values; every tenth row names its partition, the others are hashed.
    df = spark.range(0, 2000, numPartitions=2).selectExpr(
        "concat('k', cast(id % 50 as string)) as key",
        "concat('value-', cast(id as string)) as value",
        "case when id % 10 = 0 then cast(id % 3 as int) end as partition",
    )
    df.write.format("minibroker").mode("append").options(
        bootstrap=bootstrap, topic="t", acks="all", **{"linger.ms": "5"}
    ).option("ledger.path", str(ledger_dir)).save()

    [summary] = summaries(ledger_dir)
    assert summary["outcome"] == "committed"
    assert (summary["tasks"], summary["tasks_failed"]) == (2, 0)
    assert (summary["sent"], summary["acked"], summary["failed"]) == (2000, 2000, 0)
    assert summary["errors"] == {}
    assert summary["first_send_ms"] <= summary["last_ack_ms"]
    files = sorted(glob.glob(str(ledger_dir / "ledger-batch-*.parquet")))
    assert len(files) == 2 and sorted(summary["ledger_files"]) == files

    ledger = ledger_rows(ledger_dir)
    assert len(ledger) == 2000
    assert all(r["error"] is None and r["offset"] >= 0 for r in ledger)
    assert all(r["send_ms"] <= r["ack_ms"] for r in ledger)
    by_value = {r["value_sha256"]: r for r in ledger}
    for i in range(0, 2000, 10):  # explicit partitions were honoured
        assert by_value[sha(b"value-%d" % i)]["partition"] == i % 3
    assert by_value[sha(b"value-7")]["key"] == b"k7"

    written = sorted((r["topic"], r["partition"], r["offset"], r["value_sha256"]) for r in ledger)
    back = read_topic(spark, bootstrap, "t")
    assert back.columns == ["key", "value", "topic", "partition", "offset", "timestamp"]
    assert sorted(read_keys(back)) == written
    # Offsets are dense per partition: exactly 0..n-1, no duplicates from retries.
    for p in range(3):
        offsets = sorted(o for _, part, o, _ in written if part == p)
        assert offsets == list(range(len(offsets)))


def test_offsets_json_reads_a_sub_range(c: Cluster, spark: SparkSession) -> None:
    bootstrap = create_topic(c, "sub")
    produce(bootstrap, "sub", [(p, b"%d-%d" % (p, i)) for p in range(3) for i in range(20)])
    # Partition 0 from 5 to 12, partition 1 from the start to the HW, partition 2 unnamed:
    # earliest to latest (Spark's Kafka source does the same for partitions left out).
    df = read_topic(
        spark,
        bootstrap,
        "sub",
        startingOffsets='{"sub": {"0": 5, "1": -2}}',
        endingOffsets='{"sub": {"0": 12, "1": -1}}',
    )
    got = sorted((r.partition, r.offset, r.value) for r in df.collect())
    want = [(0, o, b"0-%d" % o) for o in range(5, 12)]
    want += [(p, o, b"%d-%d" % (p, o)) for p in (1, 2) for o in range(20)]
    assert got == want
    latest = read_topic(spark, bootstrap, "sub", startingOffsets="latest")
    assert latest.count() == 0

    with pytest.raises(Exception, match="outside its log") as info:
        read_topic(spark, bootstrap, "sub", endingOffsets='{"sub": {"2": 21}}').collect()
    assert "'sub' partition 2" in str(info.value)


def test_streaming_write_from_rate_matches_its_ledger(
    c: Cluster, spark: SparkSession, ledger_dir: Path, tmp_path: Path
) -> None:
    bootstrap = create_topic(c, "rate")
    wanted = 800
    # The limit ends the input after `wanted` rows while the query keeps running, so stopping
    # it cannot cut a write task that still had records to send. Spark's rate-micro-batch source
    # puts a fixed number of rows in each micro-batch: with the time-based `rate` source a slow
    # first batch (a loaded machine) took all `wanted` rows at once.
    rows = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", 200)
        .option("numPartitions", 2)
        .load()
        .limit(wanted)
        .selectExpr("cast(value % 7 as string) as key", "cast(value as string) as value")
    )
    query = (
        rows.writeStream.format("minibroker")
        .option("bootstrap", bootstrap)
        .option("topic", "rate")
        .option("ledger.path", str(ledger_dir))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    try:
        # Four micro-batches: ~3 s on an idle machine, 10 s and more each on a loaded one.
        deadline = monotonic_ms() + 180_000
        while sum(s["sent"] for s in summaries(ledger_dir)) < wanted:
            assert monotonic_ms() < deadline, f"only {summaries(ledger_dir)} after 180 s"
            # Waits a second for the next check, returning at once if the query failed.
            assert not query.awaitTermination(1), query.exception()
    finally:
        query.stop()

    done = summaries(ledger_dir)
    assert sum(s["acked"] for s in done) == wanted and sum(s["failed"] for s in done) == 0
    assert len([s for s in done if s["sent"] > 0]) >= 2, "expected several micro-batches"
    for s in done:  # ledger files are named after their micro-batch
        assert all(Path(f).name.startswith(f"ledger-{s['batch']}-") for f in s["ledger_files"])
    ledger = ledger_rows(ledger_dir)
    assert len({r["value_sha256"] for r in ledger}) == len(ledger) == wanted
    written = sorted((r["topic"], r["partition"], r["offset"], r["value_sha256"]) for r in ledger)
    assert sorted(read_keys(read_topic(spark, bootstrap, "rate"))) == written


CONNECT_BACK = "Python worker failed to connect back"


def started_reading(
    spark: SparkSession, bootstrap: str, topic: str, table: str, tmp_path: Path
) -> StreamingQuery:
    """A streaming read of `topic` into the memory table `table`, through its first micro-batch.

    Spark starts the source's Python runner as the query starts and gives it a fixed 10 s to
    connect back (PythonWorkerFactory.createSimpleWorker; no setting changes it). On a loaded
    machine (two CI runs) it was late, before any of the data source's code ran, and the query
    failed having read nothing: then it is started once more, from a new checkpoint. Any other
    failure, or the same one twice, fails the test."""
    for attempt in (1, 2):
        stream = spark.readStream.format("minibroker").option("bootstrap", bootstrap)
        query = (
            stream.option("topic", topic).load().writeStream.format("memory").queryName(table)
            .option("checkpointLocation", str(tmp_path / f"checkpoint-{attempt}"))
            .start()
        )  # fmt: skip
        try:
            query.processAllAvailable()
            return query
        except StreamingQueryException as exc:
            query.stop()
            read_nothing = "Current Committed Offsets: {}" in str(exc)
            if attempt == 2 or CONNECT_BACK not in str(exc) or not read_nothing:
                raise
    raise AssertionError("unreachable")


def test_streaming_read_in_micro_batches(c: Cluster, spark: SparkSession, tmp_path: Path) -> None:
    bootstrap = create_topic(c, "events")
    first = produce(bootstrap, "events", [(i % 3, b"first-%d" % i) for i in range(30)])
    query = started_reading(spark, bootstrap, "events", "events_rows", tmp_path)
    try:
        second = produce(bootstrap, "events", [(i % 3, b"second-%d" % i) for i in range(30)])
        query.processAllAvailable()
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    finally:
        query.stop()
    rows = spark.sql("select partition, offset, value from events_rows").collect()
    got = sorted((r.partition, r.offset, bytes(r.value)) for r in rows)
    sent = sorted(
        (m.partition, m.offset, v)
        for m, v in zip(
            first + second,
            [b"first-%d" % i for i in range(30)] + [b"second-%d" % i for i in range(30)],
            strict=True,
        )
    )
    assert got == sent
    # All of the first 30 were acknowledged (so below the HW) before the query started; the
    # second 30 may be split over micro-batches that started while they were being produced.
    assert batches[0] == 30 and len(batches) >= 2 and sum(batches) == 60


def test_errors_name_the_topic_or_the_bootstrap(c: Cluster, spark: SparkSession) -> None:
    bootstrap = create_topic(c, "exists")
    fast = {"max.block.ms": "1000"}
    with pytest.raises(Exception, match="topic 'nosuchtopic' does not exist"):
        read_topic(spark, bootstrap, "nosuchtopic", **fast).collect()
    with pytest.raises(Exception, match="topic 'nosuchtopic' does not exist"):
        spark.range(3).selectExpr("cast(id as string) as value").write.format("minibroker").mode(
            "append"
        ).options(bootstrap=bootstrap, topic="nosuchtopic", **fast).save()

    closed = f"127.0.0.1:{localcluster.free_ports(1)[0]}"
    with pytest.raises(Exception, match=f"cannot reach any broker at {closed}"):
        spark.range(3).selectExpr("cast(id as string) as value").write.format("minibroker").mode(
            "append"
        ).options(bootstrap=closed, topic="exists", **fast).save()
    with pytest.raises(Exception, match=f"cannot reach any broker at {closed}"):
        read_topic(spark, closed, "exists", **fast).collect()
    with pytest.raises(Exception, match="needs a 'value' column"):
        spark.range(3).write.format("minibroker").mode("append").options(
            bootstrap=bootstrap, topic="exists"
        ).save()
