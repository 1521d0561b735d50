"""--fault parsing, and the driver's handling of aliases and failures (no cluster: resolving
and performing are replaced by recording fakes)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from loadgen import faults
from loadgen.faults import Fault, FaultDriver, FaultError, parse_fault, parse_faults
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.localcluster import ClusterError, ClusterState, ProcessInfo


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("at=10s kill leader", (10.0, "kill", "leader")),
        ("at=1.5s pause broker-2", (1.5, "pause", "broker-2")),
        ("at=500ms resume controller", (0.5, "resume", "controller")),
        ("  at=0s   restart controller-1 ", (0.0, "restart", "controller-1")),
        ("at=3s stop broker-12", (3.0, "stop", "broker-12")),
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


class FakeCluster:
    """Stands in for resolve_target/perform/ClusterState.load: `leaders` is what `leader`
    resolves to on each successive look-up."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, leaders: list[str]) -> None:
        self.leaders = iter(leaders)
        self.performed: list[tuple[str, str]] = []
        monkeypatch.setattr(ClusterState, "load", staticmethod(lambda _dir: object()))
        monkeypatch.setattr(faults, "resolve_target", self.resolve)
        monkeypatch.setattr(faults, "perform", self.perform)

    def resolve(self, _state: object, _topic: str, target: str) -> str:
        return next(self.leaders) if target == "leader" else target

    def perform(self, _state: object, action: str, name: str) -> None:
        if name == "broker-9":
            raise ClusterError("broker-9 is not running (pid 42)")
        self.performed.append((action, name))


def run_driver(fault_texts: list[str]) -> tuple[FaultDriver, list[str]]:
    lines: list[str] = []
    driver = FaultDriver(parse_faults(fault_texts), Path("."), "t", say=lines.append)
    driver.start()
    driver.join(timeout=10)
    assert not driver.is_alive()
    return driver, lines


def test_resume_of_an_alias_hits_the_process_that_was_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cluster = FakeCluster(monkeypatch, leaders=["broker-2", "broker-3"])
    driver, lines = run_driver(["at=0s pause leader", "at=0.01s resume leader"])
    assert cluster.performed == [("pause", "broker-2"), ("resume", "broker-2")]
    assert [f.process for f in driver.executed] == ["broker-2", "broker-2"]
    assert all(f.error is None and f.wall_ms > 0 for f in driver.executed)
    assert "pause leader (broker-2) done" in lines[0]


def test_a_failed_fault_is_recorded_and_the_run_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(monkeypatch, leaders=[])
    driver, lines = run_driver(["at=0s kill broker-9", "at=0s kill broker-1"])
    assert cluster.performed == [("kill", "broker-1")]
    assert driver.executed[0].error == "broker-9 is not running (pid 42)"
    assert "failed: broker-9 is not running" in lines[0]


def test_the_fault_clock_waits_for_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(monkeypatch, leaders=[])
    polls = iter([False, False, True])
    monkeypatch.setattr(FaultDriver, "POLL_S", 0.001)
    driver = FaultDriver(
        [Fault(0.0, "kill", "broker-1", "at=0s kill broker-1")],
        Path("."),
        "t",
        load_started=lambda: next(polls),
        say=lambda _: None,
    )
    driver.start()
    driver.join(timeout=10)
    assert cluster.performed == [("kill", "broker-1")]


def test_stop_skips_faults_not_yet_due(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = FakeCluster(monkeypatch, leaders=[])
    driver = FaultDriver(parse_faults(["at=60s kill broker-1"]), Path("."), "t")
    driver.start()
    driver.stop()
    assert not driver.is_alive() and driver.executed == [] and cluster.performed == []


class FakeZk:
    def __init__(self, controller: int | None, leader: int | None) -> None:
        self.controller, self.leader = controller, leader

    def read_controller(self) -> int | None:
        return self.controller

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        assert tp == TopicPartition("t", 0)
        if self.leader is None:
            return None
        return LeaderAndIsr(
            leader=self.leader, leader_epoch=1, isr=(self.leader,), controller_epoch=1
        )


def cluster_state() -> ClusterState:
    def proc(name: str, role: str, node_id: int) -> ProcessInfo:
        return ProcessInfo(name, role, node_id, "127.0.0.1", 1, "/d", "/l", ["x"])

    return ClusterState(
        dir="/d",
        zk_connect="127.0.0.1:2181",
        profile="demo",
        processes=[
            proc("broker-1", "broker", 1),
            proc("broker-2", "broker", 2),
            proc("controller-1", "controller", 101),
            proc("controller-2", "controller", 102),
        ],
    )


@pytest.mark.parametrize(
    ("target", "controller", "leader", "expected"),
    [
        ("leader", 101, 2, "broker-2"),
        ("controller", 102, 1, "controller-2"),
        ("broker-1", None, None, "broker-1"),
        ("leader", 101, None, "partition 0 of topic 't' has no leader"),
        ("leader", 101, -1, "partition 0 of topic 't' has no leader"),
        ("controller", None, 1, "no controller is elected"),
        ("leader", 101, 7, "broker 7 is unknown"),
        ("broker-5", 101, 1, "no process named 'broker-5'"),
    ],
)
def test_targets_resolve_through_zookeeper(
    monkeypatch: pytest.MonkeyPatch,
    target: str,
    controller: int | None,
    leader: int | None,
    expected: str,
) -> None:
    @contextlib.contextmanager
    def session(_connect: str) -> Iterator[FakeZk]:
        yield FakeZk(controller, leader)

    monkeypatch.setattr(faults, "zk_session", session)
    if expected.startswith(("broker-", "controller-")):
        assert faults.resolve_target(cluster_state(), "t", target) == expected
    else:
        with pytest.raises(ClusterError, match=re.escape(expected)):
            faults.resolve_target(cluster_state(), "t", target)
