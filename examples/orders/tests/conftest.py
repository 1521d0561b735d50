"""The example's test harness, written only against minibroker's public API and pytest plugin:
place orders with a recording producer, run the service as a real process (killable), read the
invoices with a recording read_committed consumer, and check the whole history."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from minibroker.history import CheckResult, HistoryRecorder, check, load
from minibroker.testing import Cluster

APP = Path(__file__).resolve().parents[1] / "orders_app.py"
ORDERS = 300
PARTITIONS = 3
GROUP = "orders-app"  # orders_app.py's default --group


class Shop:
    """One test's orders, service runs and invoices, and their recorded histories."""

    def __init__(self, cluster: Cluster, directory: Path) -> None:
        self.cluster = cluster
        self.directory = directory
        self.apps: list[subprocess.Popen[bytes]] = []
        self.mode, self.work_ms, self.restarts = "", 0, 0
        cluster.create_topic(
            "orders", partitions=PARTITIONS, replication_factor=3, min_insync_replicas=2
        )
        cluster.create_topic("invoices", partitions=3, replication_factor=3, min_insync_replicas=2)
        # Asks the group's committed offsets (OffsetFetch); it never joins the group.
        self._offsets_reader = Consumer(
            cluster.confluent_config(
                group_id=GROUP, enable_auto_commit=False, isolation_level="read_uncommitted"
            )
        )

    def place_orders(self, n: int = ORDERS) -> None:
        with HistoryRecorder(self.directory / "orders.jsonl") as recorder:
            producer = recorder.producer(self.cluster.confluent_config(acks="all"))
            for i in range(n):
                order = {"id": i, "customer": f"c{i % 7}", "quantity": 1 + i % 5, "unit_price": 9.5}
                producer.produce("orders", json.dumps(order).encode(), key=b"order-%d" % i)
            assert producer.flush(60) == 0

    def start_app(self, mode: str, *, work_ms: int = 10) -> subprocess.Popen[bytes]:
        self.mode, self.work_ms = mode, work_ms
        run = len(self.apps)
        with (self.directory / f"app-{run}.out").open("wb") as out:  # the child keeps its own
            app = subprocess.Popen(
                [sys.executable, str(APP), "--bootstrap", self.cluster.bootstrap_servers,
                 "--mode", mode, "--work-ms", str(work_ms),
                 "--record", str(self.directory / f"app-{run}.jsonl")],
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        self.apps.append(app)
        return app

    def supervise(self) -> None:
        """As a deployment's supervisor: a run that exited asking to be restarted (status 3,
        see orders_app.watchdog) is started again; any other exit fails the test."""
        code = self.apps[-1].poll()
        if code == 3 and self.restarts < 3:
            self.restarts += 1
            self.start_app(self.mode, work_ms=self.work_ms)
        else:
            assert code is None, self.app_output()

    def invoices_sent(self) -> int:
        """Invoices the service's runs saw acknowledged (their recorded histories)."""
        return sum(
            1
            for s in load(self.histories("app-")).sends
            if s.topic == "invoices" and s.outcome == "ok"
        )

    def wait_for_invoices(self, n: int, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while self.invoices_sent() < n:
            assert time.monotonic() < deadline, f"fewer than {n} invoices in {timeout_s} s"
            self.supervise()
            time.sleep(0.05)

    def wait_mid_batch(self, sent: int = 10, timeout_s: float = 60) -> None:
        """Waits until the running service's last recorded commit is followed by `sent` invoices
        it was asked to send (their invocations; acknowledgements come only at the batch's
        flush): in commit-first mode it is then inside a batch it committed and has not
        finished, and that commit's answer is in its history, for the checker."""
        history = self.directory / f"app-{len(self.apps) - 1}.jsonl"
        deadline = time.monotonic() + timeout_s
        while True:
            h = load([history]) if history.exists() else None
            commits = [c.ts_ms for c in h.commits if c.outcome == "ok"] if h else []
            if h and commits:
                since = max(commits)
                if sum(s.topic == "invoices" and s.invoke_ms >= since for s in h.sends) >= sent:
                    return
            assert time.monotonic() < deadline, f"no batch under way in {timeout_s} s"
            self.supervise()
            time.sleep(0.05)

    def committed(self) -> int:
        """Orders the service's group committed, as the cluster answers OffsetFetch (-1 while
        it cannot answer, its coordinator being away). Not its runs' recorded histories: a run
        killed while its commit (or its transaction's commit) was on the wire holds no answer
        for it, though the commit may have taken effect."""
        try:
            partitions = self._offsets_reader.committed(
                [TopicPartition("orders", p) for p in range(PARTITIONS)], timeout=5
            )
        except KafkaException:
            return -1
        return sum(max(tp.offset, 0) for tp in partitions)

    def finish(self, timeout_s: float = 120) -> None:
        """Waits until the service committed every order, then stops it (SIGTERM) as a
        deployment would, and expects a clean exit."""
        deadline = time.monotonic() + timeout_s
        while self.committed() < ORDERS:
            assert time.monotonic() < deadline, (
                f"{self.committed()} of {ORDERS} orders committed in {timeout_s} s\n"
                + self.app_output()
            )
            self.supervise()
            time.sleep(0.1)
        run = len(self.apps) - 1  # a run restarted a moment ago: let it take SIGTERM first
        out = self.directory / f"app-{run}.out"
        while b"started" not in out.read_bytes():
            assert time.monotonic() < deadline + 30, self.app_output()
            time.sleep(0.05)
        self.apps[-1].terminate()
        assert self.apps[-1].wait(60) == 0, self.app_output()

    def histories(self, prefix: str = "") -> list[Path]:
        return sorted(self.directory.glob(f"{prefix}*.jsonl"))

    def app_output(self) -> str:
        return "\n".join(p.read_text() for p in sorted(self.directory.glob("app-*.out")))

    def read_invoices(self) -> None:
        """Every invoice, as read_committed sees it, into the history."""
        with HistoryRecorder(self.directory / "invoices.jsonl") as recorder:
            consumer = recorder.consumer(
                self.cluster.confluent_config(
                    group_id="invoice-audit", auto_offset_reset="earliest",
                    enable_auto_commit=False, isolation_level="read_committed",
                    enable_partition_eof=True,
                )
            )  # fmt: skip
            consumer.subscribe(["invoices"])
            at_end: set[int] = set()
            deadline = time.monotonic() + 60
            try:
                while at_end != {0, 1, 2} and time.monotonic() < deadline:
                    m = consumer.poll(0.5)
                    if m is None:
                        continue
                    if m.error() is None:
                        at_end.discard(m.partition())
                    elif m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
            finally:
                consumer.close()

    def check(self, delivery: str) -> CheckResult:
        self.read_invoices()
        history = load(self.histories())
        result = check(
            history, delivery=delivery, pipelines={"orders": "invoices"},
            timeline=self.cluster.events(),
        )  # fmt: skip
        (self.directory / "report.txt").write_text(result.text())
        return result

    def stop(self) -> None:
        self._offsets_reader.close()
        for app in self.apps:
            if app.poll() is None:
                app.kill()
                app.wait()


@pytest.fixture
def shop(minibroker_cluster: Cluster, tmp_path: Path) -> Iterator[Shop]:
    s = Shop(minibroker_cluster, tmp_path)
    try:
        yield s
    finally:
        s.stop()
