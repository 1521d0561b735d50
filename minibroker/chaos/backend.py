"""The one chaos interface: what a fault command may do to a node of a cluster, whichever way
the cluster runs (local processes or compose containers). Backends implement `ChaosBackend`;
callers act through `perform`, so the CLI and the load generator share one vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from minibroker.localcluster import CONTROLLER_ID_BASE, ClusterError

# The node actions, in the order the CLI lists them.
ACTIONS = ("kill", "stop", "pause", "resume", "start", "restart")
ROLES = ("zookeeper", "broker", "controller")

NodeState = Literal["running", "paused", "dead"]


class ChaosError(ClusterError):
    """A fault cannot be carried out; the message says why and what to do. A ClusterError, so
    every command that reports cluster errors as one line reports these too."""


@dataclass(frozen=True)
class Node:
    """A node a backend can act on: `zookeeper`, `broker-N` (broker id N) or `controller-N`
    (controller id 100+N), as in the process-mode cluster."""

    name: str
    role: str
    node_id: int | None


def node_name(role: str, node_id: int | None) -> str:
    """The node name the process-mode cluster gives a node of this role and id."""
    if role == "zookeeper":
        return "zookeeper"
    if node_id is None:
        raise ChaosError(f"a {role} without a node id has no name")
    if role == "controller":
        return f"controller-{node_id - CONTROLLER_ID_BASE}"
    return f"{role}-{node_id}"


def node_or_raise(nodes: list[Node], name: str, where: str) -> Node:
    """The node called `name`, or a ChaosError naming `where` and the nodes there are."""
    for node in nodes:
        if node.name == name:
            return node
    have = ", ".join(n.name for n in nodes) or "none"
    raise ChaosError(f"no node named {name!r} in {where} (have: {have})")


NETWORK_FAULTS = ("cut", "delay", "throttle")
# What `peers` may name besides nodes (the fault proxy's groups of link ends).
PEER_GROUPS = ("brokers", "controllers", "zookeeper", "clients", "all")


@dataclass(frozen=True)
class NetworkFault:
    """A fault on `name`'s network links rather than on its process: `cut` forwards nothing
    (connections stall, none is closed: a partition, so timeouts fire, not resets), `delay`
    holds every byte `delay_ms` in each direction (a round trip: twice that), `throttle` caps
    each direction of each link at `bytes_per_s`. On the links to every peer, or only to
    `peers`: node names or PEER_GROUPS. `direction` is seen from the node: "out" only what it
    sends, "in" only what it receives. Carried out by the loopback fault proxy that
    `minibroker cluster up --proxy` puts on every link; a cluster without one refuses."""

    kind: Literal["cut", "delay", "throttle"]
    name: str
    peers: tuple[str, ...] = ()
    delay_ms: int = 0
    bytes_per_s: int = 0
    direction: Literal["both", "out", "in"] = "both"

    def __post_init__(self) -> None:
        if self.kind not in NETWORK_FAULTS:
            raise ChaosError(
                f"unknown network fault {self.kind!r}: expected one of {', '.join(NETWORK_FAULTS)}"
            )
        if self.kind == "delay" and self.delay_ms <= 0:
            raise ChaosError("a delay needs delay_ms > 0")
        if self.kind == "throttle" and self.bytes_per_s <= 0:
            raise ChaosError("a throttle needs bytes_per_s > 0")
        if self.direction not in ("both", "out", "in"):
            raise ChaosError(f"direction must be both, out or in, not {self.direction!r}")


def no_fault_proxy(kind: str) -> ChaosError:
    """The error of a backend whose cluster has no fault proxy in its links."""
    advice = (
        "start the cluster with `minibroker cluster up --proxy`"
        if kind == "process"
        else "use kill, stop, pause, resume, start or restart"
    )
    return ChaosError(
        f"network faults need the loopback fault proxy between the nodes, and this {kind} "
        f"cluster has none; {advice}"
    )


class ChaosBackend(Protocol):
    """Acts on the nodes of one cluster. Every method raises ChaosError when it cannot act.

    Rules both backends keep: kill, stop and pause need a live (running or paused) node;
    resume of a running node and pause of a paused one change nothing; start needs a dead
    node; restart stops the node if it is alive (clean, localcluster.STOP_GRACE_S) and starts it.
    """

    kind: str  # "process" | "compose"
    zk_connect: str  # the cluster's ZooKeeper, for resolving leader/follower/controller

    def nodes(self) -> list[Node]: ...

    def names(self) -> list[str]: ...

    def node(self, name: str) -> Node: ...

    def state(self, name: str) -> NodeState: ...

    def describe(self, name: str) -> str:
        """A few words locating the node for humans: "pid 4242", "container mb-broker-1"."""
        ...

    def kill(self, name: str) -> None:
        """Hard failure (SIGKILL): the node's ZooKeeper session must expire."""
        ...

    def stop(self, name: str) -> None:
        """Clean shutdown (SIGTERM, SIGKILL after localcluster.STOP_GRACE_S s)."""
        ...

    def pause(self, name: str) -> None:
        """A stall: the node keeps its sockets and does nothing."""
        ...

    def resume(self, name: str) -> None: ...

    def start(self, name: str) -> None:
        """Start a killed or stopped node again with its settings and data."""
        ...

    def restart(self, name: str) -> None: ...

    def network_fault(self, fault: NetworkFault) -> list[str]:
        """Break `fault.name`'s links as described, all at once (needs a fault proxy); the
        names of the links changed ("broker-1->zookeeper", ...)."""
        ...

    def heal_network(self, name: str | None = None) -> list[str]:
        """Undo every network fault on `name`'s links, or on every link (None); held bytes go
        on. The names of the links that had a fault (needs a fault proxy)."""
        ...


def perform(backend: ChaosBackend, action: str, name: str) -> None:
    """Carry out one of ACTIONS on the node `name`."""
    methods = {
        "kill": backend.kill,
        "stop": backend.stop,
        "pause": backend.pause,
        "resume": backend.resume,
        "start": backend.start,
        "restart": backend.restart,
    }
    if action not in methods:
        raise ChaosError(f"unknown action {action!r}: expected one of {', '.join(ACTIONS)}")
    methods[action](name)
