"""`python -m loadgen` against a real cluster: a 10,000-record batch run through Spark and the
minibroker data source creates its topic, verifies every acknowledged record and writes its
report and chart. Also the verifier's comparison on hand-made rows, in the shared Spark session.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from loadgen.verify import Verification, compare
from tests.integration import spark_fixtures
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration
spark = spark_fixtures.spark  # this module's Spark session

# A deadline for a hung run: beside the image build on two workers a run took up to 190 s
# (docs/notes.md, Test suite timings).
RUN_TIMEOUT_S = 600


def loadgen(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m loadgen ARGS`, which must exit 0."""
    done = subprocess.run(
        [sys.executable, "-m", "loadgen", *args],
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"loadgen exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done


def test_a_batch_run_acknowledges_and_verifies_every_record(c: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "run"
    # The ledgers travel to the driver in the tasks' commit messages here (the other runs:
    # each task writes its own file), as a swarm's Spark workers on other machines must send them.
    done = loadgen("--records", "10000", "--master", "local[2]", "--dir", str(c.dir),
                   "--topic", "lg", "--partitions", "3", "--out", str(out),
                   "--ledger-on-driver")  # fmt: skip
    assert "Created topic lg." in done.stdout
    assert "verification: OK: 0 of 10,000 acknowledged records missing" in done.stdout

    report = json.loads((out / "report.json").read_text())
    assert report["totals"]["acked"] == 10_000 and report["totals"]["failed"] == 0
    v = report["verification"]
    assert (v["ok"], v["missing"], v["acked"], v["topic_records"]) == (True, 0, 10_000, 10_000)
    assert (v["duplicates"], v["out_of_order"], v["unacknowledged_present"]) == (0, 0, 0)
    assert sum(s["acks"] for s in report["series"]) == 10_000
    assert report["latency_ms"]["p50"] is not None
    assert report["run"]["partitions"] == 3

    chart = (out / "chart.png").read_bytes()
    assert chart[:8] == b"\x89PNG\r\n\x1a\n" and len(chart) > 10_000
    assert list((out / "ledger").glob("*.parquet"))


def test_the_comparison_counts_every_kind_of_anomaly(spark: SparkSession) -> None:
    """verify.compare on hand-made ledger and topic rows (one partition, key k000001)."""

    def value(i: int) -> bytes:
        return b"%012d|k000001|pad" % i

    def digest(i: int) -> str:
        return hashlib.sha256(value(i)).hexdigest()

    # (sequence number, offset acknowledged or -1, error, producing task)
    ledger_rows = [
        (0, 0, None, "A"),  # in place
        (1, 1, None, "A"),  # in the topic at offset 2: moved
        (2, 5, None, "A"),  # nowhere: lost
        (3, 3, None, "A"),  # in place, plus a retry's copy at offset 4
        (4, -1, "REQUEST_TIMED_OUT", "A"),  # failed, yet in the topic
        (5, -1, None, "B"),  # acks=0, in the topic
        (6, -1, None, "B"),  # acks=0, lost
        (8, 8, None, "A"),
        (7, 9, None, "A"),  # after 8 from the same task: out of order
    ]
    topic_rows = [(0, 0), (2, 1), (3, 3), (4, 3), (6, 4), (7, 5), (8, 8), (9, 7)]  # offset, seq
    ledger = spark.createDataFrame(
        [(0, off, digest(i), err, task) for i, off, err, task in ledger_rows],
        "partition int, offset long, value_sha256 string, error string, task string",
    )
    records = spark.createDataFrame(
        [(0, off, b"k000001", digest(i), i) for off, i in topic_rows],
        "partition int, offset long, key binary, digest string, seq long",
    )
    got = compare(ledger, records)
    assert got == Verification(
        sent=9,
        acked=6,
        failed=1,
        topic_records=8,
        missing=2,
        moved=1,
        duplicates=1,
        out_of_order=1,
        unacknowledged_present=1,
        unconfirmed=2,
        unconfirmed_lost=1,
    )
    assert not got.ok


def test_a_run_through_the_kafka_listeners_survives_a_killed_leader(
    c: Cluster, tmp_path: Path
) -> None:
    """`--protocol kafka`: kafka-python's (idempotent) producer in every task, the leader of a
    partition SIGKILLed mid-run; verification (over gRPC) still finds every acknowledged record,
    each once."""
    out = tmp_path / "run"
    done = loadgen("--protocol", "kafka", "--rate", "1500", "--duration", "16s",
                   "--master", "local[2]", "--dir", str(c.dir), "--topic", "kp",
                   "--partitions", "3", "--out", str(out),
                   "--fault", "at=5s kill leader")  # fmt: skip
    assert "through the brokers' KAFKA listeners" in done.stdout
    report = json.loads((out / "report.json").read_text())
    kafka_ports = {f"127.0.0.1:{b.kafka_port}" for b in c.state.by_role("broker")}
    assert set(report["run"]["producer_bootstrap"]) == kafka_ports
    assert report["run"]["protocol"] == "kafka"
    assert [f["error"] for f in report["faults"]] == [None], report["faults"]
    v = report["verification"]
    assert v["ok"] and v["missing"] == 0 and v["acked"] > 0, v
    assert v["duplicates"] == 0, v  # kafka-python's producer is idempotent with acks=all
    assert report["totals"]["acked"] + report["totals"]["failed"] == 24_000


def test_a_transactional_run_is_exactly_once_with_a_killed_leader(
    c: Cluster, tmp_path: Path
) -> None:
    """`--transactional`: each task's kafka-python producer writes transactions of 200
    records while a partition leader is SIGKILLed; a record counts as acknowledged only when
    its transaction committed, and the read_committed verification finds each exactly once,
    and nothing of a transaction that failed."""
    out = tmp_path / "run"
    done = loadgen("--protocol", "kafka", "--transactional", "--transaction-records", "200",
                   "--rate", "1000", "--duration", "12s", "--master", "local[2]",
                   "--dir", str(c.dir), "--topic", "tx", "--partitions", "3", "--out", str(out),
                   "--fault", "at=4s kill leader")  # fmt: skip
    assert "in transactions of 200 records" in done.stdout
    assert "exactly-once: yes" in done.stdout, done.stdout
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["transactional"] is True
    v = report["verification"]
    assert v["exactly_once"] is True and v["ok"], v
    assert v["acked"] > 0 and v["acked"] == v["topic_records"], v
    assert report["totals"]["acked"] + report["totals"]["failed"] == 12_000
