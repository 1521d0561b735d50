"""The checker must fail a cluster whose brokers run a known-wrong rule (the planted-bug switch):
each bug, in the scenario that exposes it, is reported as a named invariant's violation, or
(shrink-on-no-fetch, which costs availability, not the safety the invariants check) as the
scenario's expectation of Kafka's caught-up rule not met."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.scenarios import SCENARIOS, RunOptions, run

pytestmark = pytest.mark.integration

CAUGHT = [
    # The HW ignores a stalled ISR member: records are acked that the stalled follower lacks,
    # and it is then elected (clean election) -> acked records lost.
    ("hw-from-all-replicas", "stalled-follower-elected", "acked-records-present"),
    # Pre-KIP-101 truncation: old ISR members returning to an unclean leader that wrote past
    # their HW keep their own records below it -> logs diverge below the HW.
    ("truncate-to-hw", "unclean-election-on", "replicas-agree-below-hw"),
]


@pytest.mark.parametrize(("bug", "scenario", "invariant"), CAUGHT)
def test_the_checker_catches_a_planted_bug(
    bug: str, scenario: str, invariant: str, tmp_path: Path
) -> None:
    report = run(
        SCENARIOS[scenario],
        RunOptions(seed=0, cluster_dir=tmp_path / "cluster", planted_bug=bug),
    )
    print(report.render())
    assert not report.passed, f"{bug} was not caught by {scenario}:\n{report.render()}"
    assert invariant in report.violated(), report.render()
    assert report.verdict().startswith("verdict: FAIL (")


def test_shrink_on_no_fetch_fails_the_idle_follower_expectation(tmp_path: Path) -> None:
    # Kafka's rule keeps an idle follower at the leader's log end in the ISR however long it
    # is silent (reference §9 pitfall 1); "no fetch for the lag" drops the paused one.
    report = run(
        SCENARIOS["idle-follower-pause"],
        RunOptions(seed=0, cluster_dir=tmp_path / "cluster", planted_bug="shrink-on-no-fetch"),
    )
    print(report.render())
    assert not report.passed, report.render()
    assert any("stays in the ISR" in c.name for c in report.failed_checks), report.render()
    assert not report.failures, report.render()  # no safety invariant is broken
