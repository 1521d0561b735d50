"""The shared parts of the chaos interface: node names, `perform`, and choosing a backend."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from minibroker.chaos import ACTIONS, ChaosError, NetworkFault, ProcessBackend, backend_for, perform
from minibroker.chaos.backend import node_name
from minibroker.localcluster import ClusterError, ClusterState, ProcessInfo
from tests.unit.chaos.fakes import FakeBackend, process_nodes


@pytest.mark.parametrize(
    ("role", "node_id", "name"),
    [
        ("zookeeper", None, "zookeeper"),
        ("broker", 3, "broker-3"),
        ("controller", 102, "controller-2"),
    ],
)
def test_node_names_follow_the_process_mode_cluster(role: str, node_id: int, name: str) -> None:
    assert node_name(role, node_id) == name


@pytest.mark.parametrize("action", ACTIONS)
def test_perform_calls_the_method_of_the_action(action: str) -> None:
    backend = FakeBackend(process_nodes())
    perform(backend, action, "broker-1")
    assert backend.performed == [(action, "broker-1")]


def test_perform_refuses_unknown_actions() -> None:
    with pytest.raises(ChaosError, match="unknown action 'nuke': expected one of kill, stop"):
        perform(FakeBackend(process_nodes()), "nuke", "broker-1")


def test_chaos_errors_are_cluster_errors() -> None:
    # Every command that reports ClusterError as one line reports ChaosError the same way.
    assert issubclass(ChaosError, ClusterError)


def test_process_backend_needs_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ChaosError, match="no cluster in .* start one with `minibroker cluster up"):
        ProcessBackend(tmp_path)
    monkeypatch.setenv("MINIBROKER_DIR", str(tmp_path / "env"))
    with pytest.raises(ChaosError, match=f"no cluster in {tmp_path / 'env'}"):
        backend_for()


def test_network_faults_need_a_cluster_started_with_the_fault_proxy(tmp_path: Path) -> None:
    broker = ProcessInfo("broker-1", "broker", 1, "127.0.0.1", 1, str(tmp_path), "log", ["x"])
    ClusterState(str(tmp_path), "127.0.0.1:2181", "demo", processes=[broker]).save()
    backend = ProcessBackend(tmp_path)
    advice = (
        r"this process cluster has none; start the cluster with `minibroker cluster up --proxy`"
    )
    with pytest.raises(ChaosError, match=advice):
        backend.network_fault(NetworkFault("delay", "broker-1", delay_ms=100))
    with pytest.raises(ChaosError, match=advice):
        backend.heal_network()
    with pytest.raises(ChaosError, match="no process named 'broker-7'"):
        backend.network_fault(NetworkFault("cut", "broker-7"))


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        (lambda: NetworkFault("drop", "broker-1"), "unknown network fault 'drop'"),  # type: ignore[arg-type]
        (lambda: NetworkFault("delay", "broker-1"), "a delay needs delay_ms > 0"),
        (lambda: NetworkFault("throttle", "broker-1"), "a throttle needs bytes_per_s > 0"),
    ],
)
def test_network_faults_check_their_fields(fault: Callable[[], NetworkFault], message: str) -> None:
    with pytest.raises(ChaosError, match=message):
        fault()


def test_a_dir_and_a_compose_project_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"give a cluster dir \(--dir\) or a compose project"):
        backend_for(cluster_dir=tmp_path, compose_project="minibroker")
