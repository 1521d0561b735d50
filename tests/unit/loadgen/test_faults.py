"""--fault parsing, and the driver's handling of aliases and failures (no cluster: a recording
chaos backend and a fake "who leads" reader stand in for it)."""

from __future__ import annotations

import pytest

from loadgen.faults import Fault, FaultDriver, FaultError, parse_fault, parse_faults
from minibroker.runtime.waiting import wait_until
from tests.unit.chaos.fakes import FakeBackend, FakeLeadership, process_nodes


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("at=10s kill leader", (10.0, "kill", "leader")),
        ("at=1.5s pause broker-2", (1.5, "pause", "broker-2")),
        ("at=500ms resume controller", (0.5, "resume", "controller")),
        ("  at=0s   restart controller-1 ", (0.0, "restart", "controller-1")),
        ("at=3s stop broker-12", (3.0, "stop", "broker-12")),
        ("at=4s start follower", (4.0, "start", "follower")),
        ("at=5s pause follower:demo-2", (5.0, "pause", "follower:demo-2")),
    ],
)
def test_faults_parse(text: str, expected: tuple[float, str, str]) -> None:
    fault = parse_fault(text)
    assert (fault.at_s, fault.action, fault.target) == expected
    assert fault.text == text.strip()


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("kill leader", "expected 'at=<seconds>s"),
        ("at=10 kill leader", "expected 'at=<seconds>s"),
        ("at=-1s kill leader", "expected 'at=<seconds>s"),
        ("at=10s kill", "expected 'at=<seconds>s"),
        ("at=10s nuke leader", "action must be one of"),
        ("at=10s kill zookeeper", "target must be"),
        ("at=10s kill broker-x", "target must be"),
        ("at=10s kill leader:demo", "target must be"),
        ("at=10s kill leader now", "expected 'at=<seconds>s"),
    ],
)
def test_bad_faults_are_one_clear_line(text: str, complaint: str) -> None:
    with pytest.raises(FaultError, match=complaint) as info:
        parse_fault(text)
    assert "\n" not in str(info.value)


def test_faults_fire_in_time_order() -> None:
    got = parse_faults(["at=8s resume leader", "at=2s pause leader", "at=2s kill broker-1"])
    assert [f.text for f in got] == [
        "at=2s pause leader",
        "at=2s kill broker-1",
        "at=8s resume leader",
    ]


def run_driver(
    fault_texts: list[str], leaders: list[int | None], broken: tuple[str, ...] = ()
) -> tuple[FaultDriver, FakeBackend, list[str]]:
    """Run the faults at once; `leaders` are the successive leaders ZooKeeper reports."""
    lines: list[str] = []
    backend = FakeBackend(process_nodes(), broken=broken)
    who = FakeLeadership(leaders=leaders)
    driver = FaultDriver(
        parse_faults(fault_texts), backend, "t", say=lines.append, open_reader=who.open
    )
    driver.start()
    driver.join(timeout=10)
    assert not driver.is_alive()
    return driver, backend, lines


def test_resume_of_an_alias_hits_the_process_that_was_paused() -> None:
    driver, backend, lines = run_driver(["at=0s pause leader", "at=0.01s resume leader"], [2, 3])
    assert backend.performed == [("pause", "broker-2"), ("resume", "broker-2")]
    assert [f.process for f in driver.executed] == ["broker-2", "broker-2"]
    assert all(f.error is None and f.wall_ms > 0 for f in driver.executed)
    assert "pause leader (broker-2) done" in lines[0]


def test_start_of_an_alias_hits_the_process_that_was_killed() -> None:
    _, backend, _ = run_driver(["at=0s kill leader", "at=0.01s start leader"], [1, 3])
    assert backend.performed == [("kill", "broker-1"), ("start", "broker-1")]


def test_a_failed_fault_is_recorded_and_the_run_goes_on() -> None:
    driver, backend, lines = run_driver(
        ["at=0s kill broker-3", "at=0s kill broker-1"], [None], broken=("broker-3",)
    )
    assert backend.performed == [("kill", "broker-1")]
    assert driver.executed[0].error == "broker-3 is not running (pid 42)"
    assert "failed: broker-3 is not running" in lines[0]


def test_an_unresolvable_alias_is_a_failed_fault() -> None:
    driver, backend, lines = run_driver(["at=0s kill leader"], [None])
    assert backend.performed == [] and driver.executed[0].process is None
    assert driver.executed[0].error == "partition 0 of topic 't' has no leader"


def test_the_fault_clock_waits_for_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = FakeBackend(process_nodes())
    polls = iter([False, False, True])
    monkeypatch.setattr(FaultDriver, "POLL_S", 0.001)
    driver = FaultDriver(
        [Fault(0.0, "kill", "broker-1", "at=0s kill broker-1")],
        backend,
        "t",
        load_started=lambda: next(polls),
        say=lambda _: None,
    )
    driver.start()
    driver.join(timeout=10)
    assert backend.performed == [("kill", "broker-1")]


def test_stop_skips_faults_not_yet_due() -> None:
    backend = FakeBackend(process_nodes())
    driver = FaultDriver(parse_faults(["at=60s kill broker-1"]), backend, "t")
    driver.start()
    driver.stop()
    assert not driver.is_alive() and driver.executed == [] and backend.performed == []


def test_a_load_that_ends_early_still_brings_back_what_it_took_down() -> None:
    """A stream that caught up ended before its restart was due: the restart runs at once
    (the kill before it did run), a later kill does not."""
    backend = FakeBackend(process_nodes())
    driver = FaultDriver(
        parse_faults(["at=0s kill broker-1", "at=60s restart broker-1", "at=61s kill broker-2"]),
        backend, "t", say=lambda _: None,
    )  # fmt: skip
    driver.start()
    wait_until(lambda: driver.executed, timeout_s=10, what="the kill")
    driver.stop()
    assert backend.performed == [("kill", "broker-1"), ("restart", "broker-1")]
    assert driver.executed[1].offset_s < driver.executed[1].planned_s


def test_faults_need_a_backend() -> None:
    with pytest.raises(ValueError, match="need a chaos backend"):
        FaultDriver(parse_faults(["at=1s kill broker-1"]), None, "t")
    FaultDriver([], None, "t")  # no faults: nothing to act on
