"""The shared parts of the chaos interface: node names, `perform`, and choosing a backend."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.chaos import ACTIONS, ChaosError, NetworkFault, ProcessBackend, backend_for, perform
from minibroker.chaos.backend import node_name
from minibroker.localcluster import ClusterError
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


def test_process_backend_has_no_network_faults_yet() -> None:
    backend = ProcessBackend.__new__(ProcessBackend)  # no cluster needed to refuse
    with pytest.raises(ChaosError, match="this process cluster has none yet"):
        backend.network_fault(NetworkFault("delay", "broker-1", delay_ms=100))


def test_a_dir_and_a_compose_project_together_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ChaosError, match=r"give a cluster dir \(--dir\) or a compose project"):
        backend_for(cluster_dir=tmp_path, compose_project="minibroker")
