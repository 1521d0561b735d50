"""Integration fixtures: real ZooKeeper and real broker/controller processes, started through
the same `minibroker cluster` commands a user types, each test in its own dir on free ports."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from minibroker import localcluster
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore

SESSION_TIMEOUT_MS = 2000


def cli(
    *args: str, check: bool = True, timeout: float = 60, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        env=None if env is None else {**os.environ, **env},
    )
    if check and result.returncode != 0:
        raise AssertionError(
            f"minibroker {' '.join(args)} exited {result.returncode}:\n"
            f"{result.stdout}\n{result.stderr}"
        )
    return result


@pytest.fixture(autouse=True)
def _close_rpc_channels() -> Iterator[None]:
    """No test leaves gRPC channels (and their threads) behind for the next one."""
    from tests.integration import rpc

    yield
    rpc.close_channels()


@dataclass
class Cluster:
    dir: Path
    state: localcluster.ClusterState
    zk: ZkStore

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return cli(*args, "--dir", str(self.dir), check=check)

    def status(self) -> dict[str, Any]:
        out: dict[str, Any] = json.loads(self.cli("cluster", "status", "--json").stdout)
        return out

    def reload(self) -> localcluster.ClusterState:
        self.state = localcluster.ClusterState.load(self.dir)
        return self.state

    def log_events(self, name: str) -> list[dict[str, Any]]:
        from minibroker.runtime.logging import parse_line

        text = Path(self.reload().process(name).log_file).read_text()
        return [e for e in map(parse_line, text.splitlines()) if e is not None]


def _print_errors(d: Path) -> None:
    """Every ERROR and WARNING event the cluster's processes logged."""
    from minibroker.runtime.logging import parse_line

    for log in sorted((d / "logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            e = parse_line(line)
            if e is not None and e.get("level") in ("ERROR", "WARNING"):
                print(f"{log.stem}: {line[:2000]}")


@contextlib.contextmanager
def running_cluster(d: Path, *up_args: str) -> Iterator[localcluster.ClusterState]:
    """`cluster up` in `d`; on exit every process of it stopped at once (SIGTERM, then SIGKILL
    with no grace period). A test that needs a clean stop runs `cluster down` itself: waiting
    for each broker's controlled shutdown took ~5 s per cluster, minutes over the suite, for
    directories that are thrown away."""
    try:
        cli("cluster", "up", "--dir", str(d), *up_args)
        try:
            yield localcluster.ClusterState.load(d)
        except BaseException:
            _print_errors(d)  # shown with the failure: the processes' logs go with tmp_path
            raise
    finally:
        if (d / localcluster.STATE_FILE).exists():
            state = localcluster.ClusterState.load(d)
            localcluster.down(state, timeout_s=0)
            left = [p for p in state.processes if localcluster.is_alive(p)]
            assert not left, "processes left behind: " + "; ".join(map(_threads, left))


def _threads(p: localcluster.ProcessInfo) -> str:
    """A process still there after `down`, with each thread's state and kernel wait channel:
    a SIGKILLed process is gone only once every thread is (docs/notes.md, "Ports")."""
    out = []
    for task in sorted(Path(f"/proc/{p.pid}/task").glob("*")):
        try:
            state = (task / "stat").read_text().rsplit(")", 1)[1].split()[0]
            out.append(f"{task.name} {state} {(task / 'wchan').read_text() or '-'}")
        except OSError:
            continue
    return f"{p.name} (pid {p.pid}, threads: {', '.join(out) or 'none'})"


@contextlib.contextmanager
def cluster_with_zk(d: Path, *up_args: str) -> Iterator[Cluster]:
    """running_cluster, with a ZooKeeper session of the test's own for the test to read."""
    with running_cluster(d, *up_args) as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        zk.start()
        try:
            yield Cluster(d, state, zk)
        finally:
            zk.stop()


@pytest.fixture
def c(tmp_path: Path) -> Iterator[Cluster]:
    d = tmp_path / "cluster"
    with cluster_with_zk(d, "--set", f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}") as c:
        yield c


@pytest.fixture
def topic_t(tmp_path: Path) -> Iterator[Cluster]:
    """A cluster (3 brokers, 2 controllers) with topic `t`: 1 partition, RF 3,
    min.insync.replicas 2, every partition led before the test starts."""
    with cluster_with_zk(tmp_path / "cluster") as c:
        c.cli("topics", "create", "t", "--partitions", "1", "--replication-factor", "3",
              "--config", "min.insync.replicas=2", "--wait")  # fmt: skip
        yield c


def describe_partition(c: Cluster, topic: str = "t") -> dict[str, Any]:
    """`topics describe --json` of a one-partition topic."""
    (p,) = json.loads(c.cli("topics", "describe", topic, "--json").stdout)
    assert isinstance(p, dict)
    return p


def settled(c: Cluster, records: int, topic: str = "t", timeout_s: float = 20) -> dict[str, Any]:
    """`describe_partition` once every replica holds `records` records and knows they are
    committed (LEO = HW = `records`): a follower learns the HW on its fetch after the one that
    moved it, so the leader's HW alone does not say the replicas stopped moving."""

    def at_rest() -> dict[str, Any] | None:
        p = describe_partition(c, topic)
        marks = {(r["log_end_offset"], r["high_watermark"]) for r in p["replicas_state"]}
        return p if marks == {(records, records)} else None

    return wait_until(at_rest, timeout_s=timeout_s, what=f"LEO = HW = {records} on every replica")


def segment_bytes(c: Cluster, topic: str = "t") -> dict[int, bytes]:
    """Every broker's segment files of partition 0 of `topic`, concatenated, by broker id."""
    out = {}
    for p in c.reload().by_role("broker"):
        d = Path(p.data_dir) / "data" / f"{topic}-0"
        assert p.id is not None
        out[p.id] = b"".join(f.read_bytes() for f in sorted(d.glob("*.log")))
    return out
