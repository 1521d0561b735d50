"""The chaos interface on a swarm stack (deploy/stack.yml): each node is a service's current
task, wherever Swarm runs it. Node names are the process-mode ones (`broker-2`, ...), read from
the labels the stack file gives each service's containers.

- kill, stop, pause, resume act on the task's container on its node's own engine (SwarmAccess);
  a node whose engine does not answer (its machine is gone) is dead.
- start and restart ask the manager for a new task (`docker service update --force`): under
  restart_policy none a task that ended stays ended, and Swarm never starts an old task's
  container again. The new task runs on the same node (the placement label) with the same
  volume, so the broker comes back with its id and its log.
- isolate and heal: iptables rules in the task's namespace (minibroker/swarm/network.py).
- drain and activate a swarm node (`docker node update --availability`): a drained node's tasks
  are shut down cleanly and, under restart_policy none, not replaced; a broker pinned to it can
  run nowhere else (Swarm cannot move a broker's data) and is started again once it is active.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from minibroker import topology as t
from minibroker.chaos.backend import (
    ROLES,
    ChaosError,
    NetworkFault,
    Node,
    NodeState,
    node_name,
    node_or_raise,
)
from minibroker.chaos.compose import STATES, engine_errors, must_act, one_line, pause_container
from minibroker.chaos.compose_network import Member, member
from minibroker.localcluster import STOP_GRACE_S
from minibroker.swarm.access import SwarmAccess
from minibroker.swarm.network import SwarmNetwork
from minibroker.swarm.stack import SCALED_TO_ZERO, Stack, Task

AVAILABILITY = ("active", "drain", "pause")  # Swarm's, for `docker node update --availability`


class SwarmBackend:
    """Acts on the tasks of stack `name` (see ChaosBackend)."""

    kind = "swarm"

    def __init__(self, name: str, zk_connect: str, access: SwarmAccess | None = None) -> None:
        self.zk_connect = zk_connect
        self.stack = Stack(name, access or SwarmAccess.from_environment())

    def _engine(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except engine_errors() as exc:
            raise ChaosError(f"{what}: the Docker engine said: {one_line(exc)}") from None

    def _where(self) -> str:
        return f"swarm stack {self.stack.name!r}"

    def _services(self) -> list[tuple[Node, str]]:
        def listing() -> list[tuple[Node, str]]:
            out = []
            for service in self.stack.services():
                labels = self.stack.container_labels(service)
                role = labels.get(t.ROLE_LABEL)
                if role not in ROLES:
                    continue  # the dashboard, the load generator
                raw = labels.get(t.NODE_ID_LABEL, "")
                node_id = int(raw) if raw.isdigit() else None
                out.append((Node(node_name(role, node_id), role, node_id), service))
            return out

        found: list[tuple[Node, str]] = self._engine(
            f"listing the services of {self._where()} on {self.stack.access.manager}", listing
        )
        if not found:
            raise ChaosError(
                f"{self._where()} has no service with a {t.ROLE_LABEL} label: is it deployed? "
                f"(`docker stack ps {self.stack.name}`; DOCKER_HOST must name a manager)"
            )
        return found

    def _service(self, name: str) -> str:
        pairs = self._services()
        node_or_raise([n for n, _ in pairs], name, self._where())
        return next(s for n, s in pairs if n.name == name)

    def _current(self, name: str) -> tuple[Task, Any | None, NodeState]:
        """The node's current task, its container (None when it has none or its engine is
        gone) and its state."""
        task = self._engine(f"reading {name}'s task", lambda: self.stack.task(self._service(name)))
        if task.state != "running" or not task.container:
            return task, None, "dead"
        self.stack.access.engine(task.node)  # ChaosError when no engine is known for it
        try:
            c = self.stack.engine(task.node).containers.get(task.container)
        except ChaosError:
            return task, None, "dead"  # its engine does not answer: the machine is gone
        except engine_errors():
            return task, None, "dead"  # its machine (engine) is gone, or the container is
        return task, c, STATES.get(str(c.status), "dead")

    # ---- ChaosBackend ---------------------------------------------------------------------

    def nodes(self) -> list[Node]:
        return [n for n, _ in self._services()]

    def names(self) -> list[str]:
        return [n.name for n in self.nodes()]

    def node(self, name: str) -> Node:
        return node_or_raise(self.nodes(), name, self._where())

    def state(self, name: str) -> NodeState:
        return self._current(name)[2]

    def describe(self, name: str) -> str:
        task = self._engine(f"reading {name}'s task", lambda: self.stack.task(self._service(name)))
        where = f"on {task.node}" if task.node else "not scheduled"
        container = f", container {task.container[:12]}" if task.container else ""
        return f"task of {self.stack.name}_{self._service(name)} {where} ({task.state}{container})"

    def _do(self, action: str, name: str, call: Callable[[Any], None]) -> None:
        task, c, state = self._current(name)
        if not must_act(action, state, name, f"task {task.state} on {task.node or '-'}"):
            return
        assert c is not None  # a live state has its container
        self._engine(f"{action} {name} (container {c.name} on {task.node})", lambda: call(c))

    def kill(self, name: str) -> None:
        self._do("kill", name, lambda c: c.kill())

    def stop(self, name: str) -> None:
        self._do("stop", name, lambda c: c.stop(timeout=STOP_GRACE_S))

    def pause(self, name: str) -> None:
        self._do("pause", name, pause_container)

    def resume(self, name: str) -> None:
        self._do("resume", name, lambda c: c.unpause())

    def start(self, name: str) -> None:
        task, _, state = self._current(name)
        if state != "dead":
            raise ChaosError(f"{name} is already running (task on {task.node})")
        self._new_task(name)

    def restart(self, name: str) -> None:
        self._new_task(name)  # Swarm stops the old task (stop_grace_period) and starts one

    def _new_task(self, name: str) -> None:
        service = self._service(name)
        self._engine(
            f"a new task for {self.stack.name}_{service}",
            lambda: self.stack.service(service).force_update(),
        )

    # ---- swarm nodes ----------------------------------------------------------------------

    def set_availability(self, node: str, availability: str) -> None:
        """`docker node update --availability AVAILABILITY NODE` (drain, active, pause)."""
        if availability not in AVAILABILITY:
            raise ChaosError(f"availability is one of {', '.join(AVAILABILITY)}")

        def update() -> None:
            n = self.stack.manager.nodes.get(node)
            spec = dict(n.attrs["Spec"])
            spec["Availability"] = availability
            n.update(spec)

        self._engine(f"{availability} swarm node {node}", update)

    def placed_on(self, swarm_node: str) -> list[str]:
        """The nodes (broker-1, ...) whose current task runs on `swarm_node`."""
        return [
            n.name
            for n, service in self._services()
            if (task := self.stack.task(service)).node == swarm_node and task.state == "running"
        ]

    # ---- network faults -------------------------------------------------------------------

    def _members(self) -> list[tuple[Member, str]]:
        """Every running task's container as a network member, with its swarm node."""
        out = []
        for n, service in self._services():
            task, c, state = self._current(n.name)
            if c is not None and state != "dead":
                m = member(n, c, service)
                # The stack's networks only: docker_gwbridge's addresses repeat across nodes.
                ours = {k: v for k, v in m.addresses.items() if k.startswith(f"{self.stack.name}_")}
                out.append((dataclasses.replace(m, addresses=ours), task.node))
        return out

    def _network(self, swarm_node: str) -> SwarmNetwork:
        return SwarmNetwork(self.stack.engine(swarm_node), self.stack.name, self._engine)

    def network_fault(self, fault: NetworkFault) -> list[str]:
        self.node(fault.name)  # an unknown name is refused with the nodes there are
        members = self._members()
        found = [(m, where) for m, where in members if m.node.name == fault.name]
        if not found:
            raise ChaosError(f"{fault.name} is not running: nothing to cut")
        target, where = found[0]
        return self._network(where).cut(fault, target, [m for m, _ in members])

    def heal_network(self, name: str | None = None) -> list[str]:
        if name is not None:
            self.node(name)
        healed = []
        for m, where in self._members():
            if name is None or m.node.name == name:
                healed += self._network(where).heal(m)
        return healed

    # ---- status ---------------------------------------------------------------------------

    def status(self) -> list[dict[str, str]]:
        """Every service of the stack: its task's node, Swarm's task state, and health."""
        health = self._engine(f"reading {self._where()}", self.stack.health)
        rows = []
        for service, state in health.items():
            if state == SCALED_TO_ZERO:
                rows.append({"service": service, "node": "-", "task": "-", "health": state})
                continue
            task = self.stack.task(service)
            rows.append(
                {"service": service, "node": task.node or "-", "task": task.state, "health": state}
            )
        return rows
