"""The load generator in its container against the compose cluster, as deploy/README.md's
walkthrough runs it: `compose --profile loadgen run --rm loadgen ...` while the leader of one of
its partitions is killed, then on the `spark` profile's standalone master and worker. Each run
must verify every acknowledged record (0 missing) and leave report.json and chart.png in
deploy/loadgen-runs on the host.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.runtime.waiting import wait_until
from tests.compose import engine

pytestmark = [pytest.mark.compose, pytest.mark.integration]

HOST_RUNS = engine.ROOT / "deploy" / "loadgen-runs"
RUN_TIMEOUT_S = 600


@pytest.fixture
def new_runs() -> Iterator[None]:
    """The run folders a test makes are removed afterwards, through a container: the files
    belong to the folder's owner, who may be root."""
    before = set(HOST_RUNS.glob("*")) if HOST_RUNS.is_dir() else set()
    yield
    for run in sorted(set(HOST_RUNS.glob("*")) - before):
        engine.compose("--profile", "loadgen", "run", "--rm", "--no-deps", "--entrypoint", "rm",
                       "loadgen", "-rf", f"loadgen-runs/{run.name}", check=False)  # fmt: skip


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


def report(out: str) -> dict[str, Any]:
    """The run's report.json, found on the host where the run said it wrote it."""
    line = next(x for x in out.splitlines() if x.startswith("report: "))
    folder = HOST_RUNS / Path(line.split()[1]).parent.name
    assert (folder / "chart.png").stat().st_size > 0
    parsed = json.loads((folder / "report.json").read_text())
    assert isinstance(parsed, dict)
    return parsed


def leo(topic: str) -> int:
    result = engine.mb("topics", "describe", topic, "--json", "--zk", engine.ZK, check=False)
    if result.returncode != 0:
        return 0
    return sum(max(r["log_end_offset"] or 0 for r in p["replicas_state"])
               for p in json.loads(result.stdout))  # fmt: skip


def test_the_load_generator_in_a_container_survives_a_killed_broker(
    up_seconds: float, block_env: dict[str, str], new_runs: None
) -> None:
    proc = engine.start_block("loadgen", block_env)
    try:
        wait_until(lambda: leo("loadgen") > 2000 or proc.poll() is not None, timeout_s=300,
                   what="the load generator writing")  # fmt: skip
        assert proc.poll() is None, "the run ended before a broker could be killed"
        killed = engine.run_block("loadgen-kill", block_env)
    finally:
        out = finished(proc)
    verification = report(out)["verification"]
    assert verification["acked"] > 0 and verification["missing"] == 0, verification
    # Start the killed broker (`kill: broker-N (...)`) again for what follows.
    name = killed.stdout.split()[1]
    engine.mb("cluster", "start", name, "--compose", engine.PROJECT)
    engine.mb("cluster", "wait", "--compose", engine.PROJECT, "--timeout", "60")


def test_the_load_generator_runs_on_the_spark_standalone_cluster(
    up_seconds: float, block_env: dict[str, str], new_runs: None
) -> None:
    out = engine.run_block("spark", block_env, timeout=RUN_TIMEOUT_S).stdout
    print(out[-2500:])
    got = report(out)
    assert got["run"]["master"] == "spark://spark-master:7077"
    assert got["verification"]["missing"] == 0, got["verification"]
