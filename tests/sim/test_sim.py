"""The seeded simulation in CI: a batch of schedules with no violation, each planted bug caught
(proof the checker can fail), and replays that are exact.

The batch size is MINIBROKER_SIM_SCHEDULES (default 300, about 10-20 s); the full 10,000-seed
run is a command in tests/sim/README.md.
"""

from __future__ import annotations

import os
import time

import pytest

from minibroker.core.planted_bugs import PlantedBug
from tests.sim.__main__ import main
from tests.sim.runner import run_many, run_schedule

CI_SCHEDULES = int(os.environ.get("MINIBROKER_SIM_SCHEDULES", "300"))
CI_FIRST_SEED = 1_000_000  # away from the seeds the README's long run covers
SAFETY = {"acked-on-leader", "acked-on-isr", "logs-identical"}


def test_a_batch_of_schedules_keeps_every_invariant() -> None:
    summary = run_many(CI_FIRST_SEED, CI_SCHEDULES)
    reports = "\n\n".join(f.report() for f in summary.failures)
    assert not summary.failures, reports
    assert summary.schedules == CI_SCHEDULES
    print(
        f"{summary.schedules} schedules, {summary.events} events, {summary.seconds:.1f} s "
        f"({summary.per_cpu_second:.1f}/s per core)"
    )


@pytest.mark.parametrize(
    ("bug", "invariants"),
    [
        (PlantedBug.HW_FROM_ALL_REPLICAS, SAFETY),
        (PlantedBug.TRUNCATE_TO_HW, SAFETY),
        # ISR membership only decides liveness: only the shrink rule's own check sees it.
        (PlantedBug.SHRINK_ON_NO_FETCH, {"isr-shrink-rule"}),
    ],
    ids=lambda v: v.value if isinstance(v, PlantedBug) else "",
)
def test_each_planted_bug_is_caught_within_a_minute(bug: PlantedBug, invariants: set[str]) -> None:
    started = time.perf_counter()
    summary = run_many(0, 1000, bug, stop_at_first=True, time_budget_s=60)
    took = time.perf_counter() - started
    assert summary.failures, f"{bug.value}: no violation in {summary.schedules} schedules"
    failure = summary.failures[0]
    report = failure.report()
    print(f"{bug.value}: caught after {summary.schedules} schedules, {took:.1f} s\n{report}")
    assert failure.invariant in invariants, report
    assert f"replay: python -m tests.sim --seed {failure.seed} --bug {bug.value}" in report
    assert took < 60


def test_a_seed_replays_exactly() -> None:
    first, again = run_schedule(7), run_schedule(7)
    assert (first.events, first.sim_ms, first.stats) == (again.events, again.sim_ms, again.stats)
    bug = PlantedBug.TRUNCATE_TO_HW
    failing = next(s for s in range(100) if run_schedule(s, bug).failed)
    a, b = run_schedule(failing, bug), run_schedule(failing, bug)
    assert (a.invariant, a.events, a.detail, a.trace) == (b.invariant, b.events, b.detail, b.trace)


@pytest.mark.parametrize("seed", [3, 11])
def test_incremental_checks_see_what_checking_everything_sees(seed: int) -> None:
    for bug in (PlantedBug.NONE, PlantedBug.HW_FROM_ALL_REPLICAS, PlantedBug.TRUNCATE_TO_HW):
        quick, full = run_schedule(seed, bug), run_schedule(seed, bug, paranoid=True)
        assert (quick.invariant, quick.events) == (full.invariant, full.events), bug


def test_the_command_line_replays_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--seed", "5"]) == 0
    assert "seed 5: ok" in capsys.readouterr().out
    assert main(["--seed", "0", "--schedules", "40", "--bug", "truncate-to-hw"]) == 1
    out = capsys.readouterr().out
    assert "VIOLATION" in out and "replay: python -m tests.sim --seed" in out
