"""The registry has the issue's scenarios, and `minibroker scenario` lists them and refuses
bad requests in one line (no cluster is started here)."""

from __future__ import annotations

import pytest

from minibroker.cli.main import main
from minibroker.scenarios import SCENARIOS, UnknownScenario, scenario_or_raise

ISSUE_NAMES = {
    "clean-shutdown-leader",
    "clean-shutdown-controller",
    "hard-shutdown-leader",
    "hard-shutdown-controller",
    "clean-bounce-leader",
    "clean-bounce-controller",
    "hard-bounce-leader",
    "hard-bounce-controller",
    "follower-pause",
    "zk-session-expiry",
    "rolling-restart",
    "unclean-election-off",
    "unclean-election-on",
    "min-insync",
    "isolate-follower",
    "isolate-leader-from-zookeeper",
    "isolate-leader",
    "latency",
    "throttle",
    # Issue 26: planned operations under faults.
    "reassign-new-replica-killed",
    "reassign-controller-failover",
    "reassign-throttled-under-load",
    "delete-with-offline-replica",
    # Issue 29: exactly-once under faults.
    "txn-coordinator-failover",
    "txn-hung-timeout",
    "txn-zombie-fenced",
}
NEEDS_PROXY = {
    "zk-session-expiry",
    "isolate-follower",
    "isolate-leader-from-zookeeper",
    "isolate-leader",
    "latency",
    "throttle",
}


def test_every_scenario_of_the_issue_is_registered() -> None:
    assert set(SCENARIOS) >= ISSUE_NAMES
    assert {n for n, s in SCENARIOS.items() if s.needs_proxy} == NEEDS_PROXY
    assert all(s.description for s in SCENARIOS.values())


def test_only_the_unclean_scenario_expects_loss() -> None:
    assert [n for n, s in SCENARIOS.items() if s.unclean_loss_expected] == ["unclean-election-on"]
    topic = SCENARIOS["unclean-election-on"].topic_config
    assert topic["unclean.leader.election.enable"] == "true"


def test_unknown_names_get_a_suggestion() -> None:
    with pytest.raises(UnknownScenario, match="did you mean 'hard-bounce-leader'"):
        scenario_or_raise("hard-bounce-leadr")


def test_scenario_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["scenario", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(SCENARIOS)
    assert any(line.startswith("latency") and " proxy " in line for line in lines)
    assert any(line.startswith("hard-bounce-leader ") and " proxy " not in line for line in lines)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["scenario", "run"], "give one scenario name or --all"),
        (["scenario", "run", "nope"], "no scenario named 'nope'"),
        (["scenario", "run", "--all", "--keep"], "--keep keeps one scenario's cluster"),
    ],
)
def test_bad_requests_are_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
