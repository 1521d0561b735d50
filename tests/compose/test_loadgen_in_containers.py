"""The load generator in its container against the compose cluster: `compose --profile loadgen
run --rm loadgen ...` while a broker container is killed mid-run, then on the `spark` profile's
standalone master and worker. Each run must verify every acknowledged record (0 missing) and
leave report.json and chart.png in deploy/loadgen-runs on the host.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest

from minibroker.runtime.waiting import wait_until
from tests.compose import engine
from tests.compose.test_cluster_on_engine import mb

pytestmark = [pytest.mark.compose, pytest.mark.integration]

HOST_RUNS = engine.ROOT / "deploy" / "loadgen-runs"
RUN_TIMEOUT_S = 600


@pytest.fixture
def run_name() -> Iterator[str]:
    """A run folder of this test's own, removed afterwards through a container (the files belong
    to the folder's owner, which may be root)."""
    name = f"test-{time.strftime('%Y%m%d-%H%M%S')}"
    yield name
    engine.compose("--profile", "loadgen", "run", "--rm", "--no-deps", "--entrypoint", "rm",
                   "loadgen", "-rf", f"loadgen-runs/{name}", check=False)  # fmt: skip


def loadgen(*args: str) -> subprocess.Popen[str]:
    command = engine.compose_command()
    assert command is not None
    return subprocess.Popen(
        [*command, "-f", str(engine.COMPOSE_FILE), "-p", engine.PROJECT, "--profile", "loadgen",
         "run", "--rm", "loadgen", *args],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def finished(proc: subprocess.Popen[str]) -> str:
    try:
        out, _ = proc.communicate(timeout=RUN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"the load generator did not finish in {RUN_TIMEOUT_S} s:\n{out[-4000:]}")
    print(out[-2500:])
    assert proc.returncode == 0, out[-4000:]
    return out


def report(name: str) -> dict[str, Any]:
    folder = HOST_RUNS / name
    assert (folder / "chart.png").stat().st_size > 0
    parsed = json.loads((folder / "report.json").read_text())
    assert isinstance(parsed, dict)
    return parsed


def leo(topic: str) -> int:
    result = mb("topics", "describe", topic, "--json", "--zk", engine.ZK, check=False)
    if result.returncode != 0:
        return 0
    return sum(max(r["log_end_offset"] or 0 for r in p["replicas_state"])
               for p in json.loads(result.stdout))  # fmt: skip


def test_the_load_generator_in_a_container_survives_a_killed_broker(
    up_seconds: float, run_name: str
) -> None:
    topic = "loadgen-compose"
    proc = loadgen("--records", "60000", "--topic", topic, "--out", f"loadgen-runs/{run_name}")
    try:
        wait_until(lambda: leo(topic) > 2000 or proc.poll() is not None, timeout_s=300,
                   what="the load generator writing")  # fmt: skip
        assert proc.poll() is None, "the run ended before a broker could be killed"
        killed = mb("cluster", "kill", "leader", "--topic", topic, "--compose", engine.PROJECT)
    finally:
        finished(proc)
    verification = report(run_name)["verification"]
    assert verification["acked"] > 0 and verification["missing"] == 0, verification
    # Bring the killed broker back (`kill: broker-N (...)`) for the next test.
    name = killed.stdout.split()[1]
    mb("cluster", "start", name, "--compose", engine.PROJECT)
    wait = subprocess.run(
        ["minibroker", "cluster", "wait", "--compose", engine.PROJECT, "--timeout", "60"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
        env=engine.cli_env(),
    )  # fmt: skip
    assert wait.returncode == 0, wait.stdout + wait.stderr


def test_the_load_generator_runs_on_the_spark_standalone_cluster(
    up_seconds: float, run_name: str
) -> None:
    engine.compose("--profile", "spark", "up", "-d", "spark-master", "spark-worker")
    master = "spark://spark-master:7077"
    out = f"loadgen-runs/{run_name}"
    proc = loadgen(
        "--records", "20000", "--topic", "loadgen-spark", "--master", master, "--out", out
    )
    finished(proc)
    got = report(run_name)
    assert got["run"]["master"] == master
    assert got["verification"]["missing"] == 0, got["verification"]
