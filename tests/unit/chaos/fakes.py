"""Stand-ins for the chaos interface's collaborators: a Docker SDK client that records the
calls made on it, a chaos backend, and a "who leads" reader."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.chaos import ChaosError, NetworkFault, Node, NodeState
from minibroker.chaos.compose import NODE_ID_LABEL, PROJECT_LABEL, ROLE_LABEL, SERVICE_LABEL
from minibroker.core.types import LeaderAndIsr, TopicPartition


class FakeContainer:
    """Records every call as (container name, method, kwargs) in the client's `calls`."""

    def __init__(self, client: FakeDockerClient, name: str, labels: dict[str, str], status: str):
        self.client, self.name, self.labels, self.status = client, name, labels, status
        self.id = f"id-{name}"
        # One bridge network, as compose makes: 172.30.0.1 is the gateway (the host's side).
        address = f"172.30.0.{len(client.containers_) + 2}"
        network = {"IPAddress": address, "Gateway": "172.30.0.1"}
        self.attrs: dict[str, Any] = {"NetworkSettings": {"Networks": {"mb_default": network}}}
        self.log_text = ""

    def _record(self, method: str, **kwargs: Any) -> None:
        self.client.calls.append((self.name, method, kwargs))
        if self.client.fail_with is not None:
            raise self.client.fail_with

    def kill(self) -> None:
        self._record("kill")

    def stop(self, *, timeout: int) -> None:
        self._record("stop", timeout=timeout)

    def pause(self) -> None:
        self._record("pause")

    def unpause(self) -> None:
        self._record("unpause")

    def start(self) -> None:
        self._record("start")

    def restart(self, *, timeout: int) -> None:
        self._record("restart", timeout=timeout)

    def logs(self, *, stdout: bool, stderr: bool) -> bytes:
        return self.log_text.encode() if stdout and stderr else b""


class FakeContainers:
    def __init__(self, client: FakeDockerClient) -> None:
        self.client = client

    def run(self, image: str, command: list[str], **kwargs: Any) -> bytes:
        """A helper container (the network faults' iptables): recorded, prints nothing."""
        self.client.runs.append({"image": image, "command": command, **kwargs})
        return b""

    def list(self, *, all: bool, filters: dict[str, list[str]]) -> list[FakeContainer]:
        self.client.list_calls.append({"all": all, "filters": filters})
        wanted = set(filters.get("label", []))
        return [
            c
            for c in self.client.containers_
            if all or c.status == "running"
            if wanted <= {f"{k}={v}" for k, v in c.labels.items()}
        ]


class FakeNetwork:
    """The project's one network: connect/disconnect are recorded and change the container's
    attachments as the engine does (a stopped container stays attached, without an address)."""

    def __init__(self, client: FakeDockerClient, name: str) -> None:
        self.client, self.name = client, name

    def disconnect(self, container: FakeContainer) -> None:
        container._record("disconnect", network=self.name)
        del container.attrs["NetworkSettings"]["Networks"][self.name]

    def connect(self, container: FakeContainer, *, aliases: list[str]) -> None:
        container._record("connect", network=self.name, aliases=aliases)
        container.attrs["NetworkSettings"]["Networks"][self.name] = {"IPAddress": "172.30.0.99"}


class FakeNetworks:
    def __init__(self, client: FakeDockerClient) -> None:
        self.client = client

    def list(self, *, filters: dict[str, str]) -> list[FakeNetwork]:
        return [FakeNetwork(self.client, "mb_default")]


class FakeImages:
    def get(self, name: str) -> str:
        return name


@dataclass
class FakeDockerClient:
    containers_: list[FakeContainer] = field(default_factory=list)
    calls: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    list_calls: list[dict[str, Any]] = field(default_factory=list)
    runs: list[dict[str, Any]] = field(default_factory=list)
    fail_with: Exception | None = None

    def __post_init__(self) -> None:
        self.containers = FakeContainers(self)
        self.networks = FakeNetworks(self)
        self.images = FakeImages()

    def add(
        self,
        service: str,
        role: str | None,
        node_id: str | None = None,
        *,
        status: str = "running",
        project: str = "minibroker",
        extra: dict[str, str] | None = None,
    ) -> FakeContainer:
        labels = {PROJECT_LABEL: project, SERVICE_LABEL: service, **(extra or {})}
        if role is not None:
            labels[ROLE_LABEL] = role
        if node_id is not None:
            labels[NODE_ID_LABEL] = node_id
        c = FakeContainer(self, f"{project}-{service}-1", labels, status)
        self.containers_.append(c)
        return c


def compose_cluster(project: str = "minibroker") -> FakeDockerClient:
    """ZooKeeper, three brokers, two controllers and a load generator, all running."""
    client = FakeDockerClient()
    client.add("zookeeper", "zookeeper", project=project)
    for n in (1, 2, 3):
        client.add(f"broker-{n}", "broker", str(n), project=project)
    for n in (1, 2):
        client.add(f"controller-{n}", "controller", str(100 + n), project=project)
    client.add("loadgen", "loadgen", project=project)
    return client


class FakeBackend:
    """A ChaosBackend over a fixed set of nodes that records what it was asked to do; acting
    on a node named in `broken` fails as a dead process would."""

    kind = "fake"
    zk_connect = "127.0.0.1:1"

    def __init__(self, nodes: Sequence[Node], broken: Sequence[str] = ()) -> None:
        self._nodes = list(nodes)
        self.broken = set(broken)
        self.performed: list[tuple[str, str]] = []

    def nodes(self) -> list[Node]:
        return list(self._nodes)

    def names(self) -> list[str]:
        return [n.name for n in self._nodes]

    def node(self, name: str) -> Node:
        for n in self._nodes:
            if n.name == name:
                return n
        raise ChaosError(f"no process named {name!r} in this cluster")

    def state(self, name: str) -> NodeState:
        return "running"

    def describe(self, name: str) -> str:
        return "fake"

    def _act(self, action: str, name: str) -> None:
        self.node(name)
        if name in self.broken:
            raise ChaosError(f"{name} is not running (pid 42)")
        self.performed.append((action, name))

    def kill(self, name: str) -> None:
        self._act("kill", name)

    def stop(self, name: str) -> None:
        self._act("stop", name)

    def pause(self, name: str) -> None:
        self._act("pause", name)

    def resume(self, name: str) -> None:
        self._act("resume", name)

    def start(self, name: str) -> None:
        self._act("start", name)

    def restart(self, name: str) -> None:
        self._act("restart", name)

    def network_fault(self, fault: NetworkFault) -> list[str]:
        raise ChaosError("no proxy")

    def heal_network(self, name: str | None = None) -> list[str]:
        raise ChaosError("no proxy")


def process_nodes(brokers: int = 3, controllers: int = 2) -> list[Node]:
    return [
        Node("zookeeper", "zookeeper", None),
        *(Node(f"broker-{n}", "broker", n) for n in range(1, brokers + 1)),
        *(Node(f"controller-{n}", "controller", 100 + n) for n in range(1, controllers + 1)),
    ]


class FakeLeadership:
    """Answers "who leads": `leaders` are the successive leaders of every partition (one per
    look-up, the last one repeating), `isr` its ISR, `controller` the active controller."""

    def __init__(
        self,
        leaders: Sequence[int | None] = (1,),
        isr: Sequence[int] = (1, 2, 3),
        controller: int | None = 101,
    ) -> None:
        self.leaders = list(leaders)
        self.isr = tuple(isr)
        self.controller = controller
        self.asked: list[TopicPartition] = []
        self.sessions = 0

    def read_controller(self) -> int | None:
        return self.controller

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        self.asked.append(tp)
        leader = self.leaders.pop(0) if len(self.leaders) > 1 else self.leaders[0]
        if leader is None:
            return None
        return LeaderAndIsr(leader=leader, leader_epoch=1, isr=self.isr, controller_epoch=1)

    @contextlib.contextmanager
    def open(self) -> Iterator[FakeLeadership]:
        self.sessions += 1
        yield self
