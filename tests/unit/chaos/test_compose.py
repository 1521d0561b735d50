"""ComposeBackend against a recording fake of the Docker SDK: the exact listing filter, the
container call of each action, node names from labels, and the errors; plus the real SDK
pointed at a socket that does not exist. tests/compose runs the same backend on the real
engine."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from docker.errors import APIError

from minibroker.chaos import (
    NODE_ID_LABEL,
    ROLE_LABEL,
    ChaosError,
    ComposeBackend,
    NetworkFault,
    Node,
    backend_for,
)
from minibroker.chaos.compose import SERVICE_LABEL
from tests.unit.chaos.fakes import FakeDockerClient, compose_cluster

PROJECT_FILTER = {"label": ["com.docker.compose.project=minibroker"]}


def backend(client: FakeDockerClient, project: str = "minibroker") -> ComposeBackend:
    return ComposeBackend(project, "127.0.0.1:2181", client=client)


def test_nodes_are_named_from_the_labels_and_listed_with_the_project_filter() -> None:
    client = compose_cluster()
    client.add("broker-9", "broker", "9", project="other")  # another project's: not ours
    client.add("shell", "broker", "4", extra={"com.docker.compose.oneoff": "True"})
    b = backend(client)
    assert b.nodes() == [
        Node("zookeeper", "zookeeper", None),
        Node("broker-1", "broker", 1),
        Node("broker-2", "broker", 2),
        Node("broker-3", "broker", 3),
        Node("controller-1", "controller", 101),
        Node("controller-2", "controller", 102),
    ]
    assert b.names()[-1] == "controller-2" and b.kind == "compose"
    assert b.node("controller-2") == Node("controller-2", "controller", 102)
    assert client.list_calls[0] == {"all": True, "filters": PROJECT_FILTER}
    assert b.describe("broker-2") == "container minibroker-broker-2-1, service broker-2"


@pytest.mark.parametrize(
    ("action", "status", "expected"),
    [
        ("kill", "running", ("kill", {})),
        ("kill", "paused", ("kill", {})),
        ("stop", "running", ("stop", {"timeout": 30})),
        ("pause", "running", ("pause", {})),
        ("resume", "paused", ("unpause", {})),
        ("start", "exited", ("start", {})),
        ("start", "created", ("start", {})),
        ("restart", "running", ("restart", {"timeout": 30})),
        ("restart", "exited", ("restart", {"timeout": 30})),
        ("pause", "paused", None),  # already paused: nothing to do
        ("resume", "running", None),  # not paused: nothing to do
    ],
)
def test_each_action_makes_one_container_call(
    action: str, status: str, expected: tuple[str, dict[str, Any]] | None
) -> None:
    client = compose_cluster()
    client.containers_[2].status = status  # broker-2
    getattr(backend(client), action)("broker-2")
    assert client.calls == ([("minibroker-broker-2-1", *expected)] if expected else [])
    assert all(call == {"all": True, "filters": PROJECT_FILTER} for call in client.list_calls)


@pytest.mark.parametrize(
    ("action", "status", "complaint"),
    [
        ("kill", "exited", "broker-2 is not running (container minibroker-broker-2-1 is exited)"),
        ("stop", "dead", "broker-2 is not running"),
        ("pause", "exited", "broker-2 is not running"),
        ("resume", "exited", "broker-2 is not running"),
        ("start", "running", "broker-2 is already running"),
        ("start", "paused", "broker-2 is already running"),
    ],
)
def test_actions_refuse_nodes_in_the_wrong_state(action: str, status: str, complaint: str) -> None:
    client = compose_cluster()
    client.containers_[2].status = status
    with pytest.raises(ChaosError, match=re.escape(complaint)):
        getattr(backend(client), action)("broker-2")
    assert client.calls == []


@pytest.mark.parametrize(
    ("status", "state"),
    [
        ("running", "running"),
        ("restarting", "running"),
        ("paused", "paused"),
        ("exited", "dead"),
        ("created", "dead"),
        ("dead", "dead"),
    ],
)
def test_container_status_maps_to_node_state(status: str, state: str) -> None:
    client = compose_cluster()
    client.containers_[4].status = status  # controller-1
    assert backend(client).state("controller-1") == state


def test_an_unknown_node_names_the_project_and_what_was_found() -> None:
    with pytest.raises(ChaosError) as info:
        backend(compose_cluster()).kill("broker-9")
    assert str(info.value) == (
        "no node named 'broker-9' in compose project 'minibroker' (have: zookeeper, broker-1, "
        "broker-2, broker-3, controller-1, controller-2)"
    )


def test_a_project_without_nodes_says_what_it_found() -> None:
    client = FakeDockerClient()
    with pytest.raises(ChaosError, match=r"compose project 'demo'.*no container at all.*is it up"):
        backend(client, "demo").pause("broker-1")
    assert client.list_calls[0]["filters"] == {"label": ["com.docker.compose.project=demo"]}
    client.add("web", None, project="demo")
    with pytest.raises(ChaosError, match=r"minibroker\.role label \(found: demo-web-1\)"):
        backend(client, "demo").pause("broker-1")


def test_label_mistakes_are_named() -> None:
    client = compose_cluster()
    client.add("broker-x", "broker")  # no node id
    with pytest.raises(ChaosError, match="minibroker-broker-x-1 .* no numeric minibroker.node-id"):
        backend(client).nodes()
    client = compose_cluster()
    client.add("broker-1b", "broker", "1")
    with pytest.raises(ChaosError, match="several containers .* are broker-1"):
        backend(client).kill("broker-1")


def test_a_freeze_the_kernel_refuses_is_tried_again() -> None:
    client = compose_cluster()
    refusal = APIError("500 Server Error", explanation="OCI runtime pause failed: unable to freeze")
    client.fail_with = refusal
    with pytest.raises(ChaosError, match="unable to freeze"):
        backend(client).pause("broker-1")  # every try refused: one line
    assert [m for _, m, _ in client.calls] == ["pause"] * 3

    tries: list[str] = []

    def refuse_once() -> None:
        tries.append("pause")
        if len(tries) == 1:
            raise refusal

    client.fail_with = None
    container = next(c for c in client.containers_ if c.name.endswith("broker-1-1"))
    container.pause = refuse_once  # type: ignore[method-assign]
    backend(client).pause("broker-1")
    assert tries == ["pause", "pause"]


def test_engine_errors_become_one_line_chaos_errors() -> None:
    client = compose_cluster()
    client.fail_with = APIError("409 Client Error", explanation="Container x is not\nrunning")
    with pytest.raises(ChaosError) as info:
        backend(client).pause("broker-1")
    assert str(info.value) == (
        "pause broker-1 (container minibroker-broker-1-1): the Docker engine said: "
        "Container x is not running"
    )


def test_a_cut_from_some_peers_is_iptables_drops_in_the_nodes_namespace() -> None:
    client = compose_cluster()
    b = backend(client)
    links = b.network_fault(NetworkFault("cut", "broker-1", peers=("zookeeper",)))
    assert links == ["broker-1->zookeeper"]
    (run,) = client.runs
    assert run["image"] == "minibroker-netfault:dev" and run["cap_add"] == ["NET_ADMIN"]
    assert run["network_mode"] == "container:id-minibroker-broker-1-1"
    script = run["command"][-1]
    zk_ip = "172.30.0.2"  # the first container added
    assert f"-A MINIBROKER-CHAOS -s {zk_ip} -j DROP" in script
    assert f"-A MINIBROKER-CHAOS -d {zk_ip} -j DROP" in script
    assert "-I INPUT 1 -j MINIBROKER-CHAOS" in script and "-I OUTPUT 1" in script


def test_one_way_cuts_and_groups_name_the_right_addresses() -> None:
    client = compose_cluster()
    b = backend(client)
    links = b.network_fault(
        NetworkFault("cut", "broker-1", peers=("brokers", "clients"), direction="out")
    )
    assert links == ["broker-1->broker-2", "broker-1->broker-3", "broker-1->clients"]
    script = client.runs[0]["command"][-1]
    assert re.search(r"-s \d", script) is None  # only what it sends
    for ip in ("172.30.0.4", "172.30.0.5", "172.30.0.1"):  # brokers 2, 3 and the gateway
        assert f"-d {ip} -j DROP" in script


def test_isolate_disconnects_and_heal_reconnects_only_what_was_cut() -> None:
    client = compose_cluster()
    b = backend(client)
    # A killed container stays attached to its network, without an address: nothing to heal.
    client.containers_[4].status = "exited"  # controller-1
    client.containers_[4].attrs["NetworkSettings"]["Networks"]["mb_default"]["IPAddress"] = ""
    assert b.network_fault(NetworkFault("cut", "broker-1")) == ["broker-1->all (mb_default)"]
    assert client.calls == [("minibroker-broker-1-1", "disconnect", {"network": "mb_default"})]
    with pytest.raises(ChaosError, match="controller-1 is not running"):
        b.network_fault(NetworkFault("cut", "controller-1"))
    assert b.heal_network() == ["broker-1->all (mb_default)"]
    assert client.calls[-1] == (
        "minibroker-broker-1-1",
        "connect",
        {"network": "mb_default", "aliases": ["broker-1"]},
    )
    assert b.heal_network() == []


def test_node_logs_are_the_brokers_and_controllers_container_logs() -> None:
    client = compose_cluster()
    for c in client.containers_:
        c.log_text = f"{c.labels[SERVICE_LABEL]} line\n"
    client.containers_[4].status = "exited"  # a killed controller keeps its log
    logs = backend(client).node_logs()
    assert sorted(logs) == ["broker-1", "broker-2", "broker-3", "controller-1", "controller-2"]
    assert logs["controller-1"] == "controller-1 line\n"


def test_compose_network_faults_refuse_what_they_cannot_do() -> None:
    b = backend(compose_cluster())
    with pytest.raises(ChaosError, match="netem"):
        b.network_fault(NetworkFault("delay", "broker-1", delay_ms=50))
    with pytest.raises(ChaosError, match="unknown peer 'broker-9'"):
        b.network_fault(NetworkFault("cut", "broker-1", peers=("broker-9",)))
    with pytest.raises(ChaosError, match="no node named 'broker-7'"):
        b.heal_network("broker-7")


def test_backend_for_compose_uses_the_zk_flag_then_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    client = compose_cluster("demo")
    monkeypatch.delenv("MINIBROKER_ZK", raising=False)
    b = backend_for(compose_project="demo", docker_client=client)
    assert (b.kind, b.zk_connect) == ("compose", "127.0.0.1:2181")
    monkeypatch.setenv("MINIBROKER_ZK", "127.0.0.1:3000")
    assert backend_for(compose_project="demo", docker_client=client).zk_connect == "127.0.0.1:3000"
    assert backend_for(compose_project="d", zk="h:1", docker_client=client).zk_connect == "h:1"


def test_without_a_docker_engine_the_error_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Docker SDK, no fake: nothing listens at this socket."""
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    makers: list[Callable[[], object]] = [
        lambda: ComposeBackend("minibroker", "127.0.0.1:2181"),
        lambda: backend_for(compose_project="minibroker"),
    ]
    for make in makers:
        with pytest.raises(ChaosError) as info:
            make()
        message = str(info.value)
        assert message.startswith(
            "no Docker engine reachable at unix:///nonexistent/docker.sock (from DOCKER_HOST): "
        )
        assert "needs a running Docker engine" in message
        assert "use the process-mode cluster (--dir DIR)" in message
        assert "\n" not in message


def test_the_labels_are_the_ones_the_compose_file_is_generated_with() -> None:
    topology = pytest.importorskip("minibroker.topology")
    assert (ROLE_LABEL, NODE_ID_LABEL) == (topology.ROLE_LABEL, topology.NODE_ID_LABEL)
