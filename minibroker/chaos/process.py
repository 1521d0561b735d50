"""The chaos interface on a process-mode cluster: signals to the PIDs in its cluster.json, and
network faults through its fault proxy's control service (a cluster started with `--proxy`).

The state file is read again before every action, because `start` and `restart` record a new
PID there (possibly from another command in another process).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from minibroker import localcluster
from minibroker.chaos.backend import ChaosError, NetworkFault, Node, NodeState, no_fault_proxy
from minibroker.faultproxy.client import FaultProxyClient, FaultProxyError
from minibroker.faultproxy.model import LinkView
from minibroker.localcluster import FAULT_PROXY, TOOL_ROLES, ClusterError, ClusterState


@contextlib.contextmanager
def _as_chaos_errors() -> Iterator[None]:
    try:
        yield
    except ChaosError:
        raise
    except (ClusterError, FaultProxyError) as exc:
        raise ChaosError(str(exc)) from None


class ProcessBackend:
    """Acts on the processes of the cluster in `cluster_dir` (see ChaosBackend)."""

    kind = "process"

    def __init__(self, cluster_dir: Path) -> None:
        self.cluster_dir = cluster_dir
        self.zk_connect = self._load().zk_connect  # an unknown dir fails now, not at a fault

    def _load(self) -> ClusterState:
        with _as_chaos_errors():
            return ClusterState.load(self.cluster_dir)

    def nodes(self) -> list[Node]:
        # The fault proxy is the cluster's network and the dashboard a window on it: no nodes.
        return [
            Node(p.name, p.role, p.id) for p in self._load().processes if p.role not in TOOL_ROLES
        ]

    def names(self) -> list[str]:
        return [n.name for n in self.nodes()]

    def node(self, name: str) -> Node:
        with _as_chaos_errors():
            p = self._load().process(name)  # "no process named ..." with the names there are
        if p.role == FAULT_PROXY:
            raise ChaosError(f"{name} is the fault proxy, not a node of the cluster")
        if p.role in TOOL_ROLES:
            raise ChaosError(f"{name} is the {p.role}, not a node of the cluster")
        return Node(p.name, p.role, p.id)

    def state(self, name: str) -> NodeState:
        with _as_chaos_errors():
            got = localcluster.process_state(self._load().process(name))
        assert got in ("running", "paused", "dead")
        return cast(NodeState, got)

    def describe(self, name: str) -> str:
        with _as_chaos_errors():
            return f"pid {self._load().process(name).pid}"

    def _send(self, name: str, action: str) -> None:
        with _as_chaos_errors():
            localcluster.send(self._load(), name, action)

    def kill(self, name: str) -> None:
        self._send(name, "kill")

    def stop(self, name: str) -> None:
        self._send(name, "stop")

    def pause(self, name: str) -> None:
        self._send(name, "pause")

    def resume(self, name: str) -> None:
        self._send(name, "resume")

    def start(self, name: str) -> None:
        with _as_chaos_errors():
            localcluster.start(self._load(), name)

    def restart(self, name: str) -> None:
        with _as_chaos_errors():
            localcluster.restart(self._load(), name)

    def fault_proxy(self) -> FaultProxyClient:
        """A client of the cluster's running fault proxy (close it after use); ChaosError when
        the cluster has none or it is not running."""
        state = self._load()
        info = state.fault_proxy()
        if info is None:
            raise no_fault_proxy(self.kind)
        if not localcluster.is_alive(info):
            raise ChaosError(
                f"the fault proxy of this cluster is not running (pid {info.pid}), so none of "
                "its links is up: `minibroker cluster down`, then `up --proxy` again"
            )
        return FaultProxyClient(info.address)

    def network_fault(self, fault: NetworkFault) -> list[str]:
        self.node(fault.name)  # an unknown node fails naming the nodes there are
        with _as_chaos_errors(), self.fault_proxy() as proxy:
            if fault.kind == "cut":
                return proxy.isolate(fault.name, fault.peers, direction=fault.direction)
            if fault.kind == "delay":
                return proxy.delay(
                    fault.name, fault.delay_ms, fault.peers, direction=fault.direction
                )
            return proxy.throttle(
                fault.name, fault.bytes_per_s, fault.peers, direction=fault.direction
            )

    def heal_network(self, name: str | None = None) -> list[str]:
        if name is not None:
            self.node(name)
        with _as_chaos_errors(), self.fault_proxy() as proxy:
            return proxy.heal(name)

    def network_links(self) -> list[LinkView]:
        """Every link of the fault proxy with its faults, connections and bytes."""
        with _as_chaos_errors(), self.fault_proxy() as proxy:
            return proxy.links()
