"""Every registered scenario on a real cluster (ZooKeeper, 3 brokers, 2 controllers as
processes) must end with `verdict: PASS`: no invariant violated, every expectation met. The
report (timeline included) is printed; `pytest -s` shows it, a failure carries it."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.scenarios import SCENARIOS, RunOptions, run
from tests.scenarios.conftest import fault_proxy_available

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_scenario_passes(name: str, tmp_path: Path) -> None:
    scenario = SCENARIOS[name]
    if scenario.needs_proxy and not fault_proxy_available():
        pytest.skip(f"{name} needs the loopback fault proxy (`cluster up --proxy`)")
    report = run(scenario, RunOptions(seed=0, cluster_dir=tmp_path / "cluster"))
    print(report.render())
    rerun = f"rerun: minibroker scenario run {name} --seed 0"
    # The cause first: CI keeps a failure message's head and tail, not its middle.
    assert report.passed, "\n".join([*report.problems(), rerun, "", report.render()])
    assert report.history.summary()["acked"] > 100
