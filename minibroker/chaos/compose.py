"""The chaos interface on a compose cluster, through the Docker SDK for Python.

Containers are found by the labels compose puts on them (project, service) and named by the
two labels deploy/docker-compose.yml sets on each service (role, node id), so node names are
the process-mode ones: `zookeeper`, `broker-N`, `controller-N` (controller id 100+N).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable
from typing import Any, Protocol, cast

from minibroker.chaos.backend import (
    ROLES,
    ChaosError,
    NetworkFault,
    Node,
    NodeState,
    node_name,
    node_or_raise,
)
from minibroker.chaos.compose_network import ComposeNetwork, Member, member
from minibroker.localcluster import STOP_GRACE_S

# Labels docker compose sets on every container of a project.
PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"
ONEOFF_LABEL = "com.docker.compose.oneoff"  # "True" on `docker compose run` containers
# Labels deploy/docker-compose.yml sets on each service.
ROLE_LABEL = "minibroker.role"  # zookeeper | broker | controller | loadgen | setup ...
SETUP_ROLE = "setup"
COMPLETED = "completed"  # a set-up service that exited 0
NODE_ID_LABEL = "minibroker.node-id"  # broker id ("1") or controller id ("101")
# deploy/.env names the project; a COMPOSE_PROJECT_NAME in the environment overrides it for
# compose and for us alike.
DEFAULT_PROJECT = os.environ.get("COMPOSE_PROJECT_NAME") or "minibroker"
DEFAULT_SOCKET = "unix:///var/run/docker.sock"

# Docker's container states; "restarting" counts as running (it is coming back by itself).
STATES: dict[str, NodeState] = {"running": "running", "restarting": "running", "paused": "paused"}
# The states each action acts in (ChaosBackend's rules), and the pairs that change nothing.
ALIVE: tuple[NodeState, ...] = ("running", "paused")
NEEDS: dict[str, tuple[NodeState, ...]] = {
    "kill": ALIVE,
    "stop": ALIVE,
    "pause": ALIVE,
    "resume": ALIVE,
    "start": ("dead",),
    "restart": ("running", "paused", "dead"),
}
NO_CHANGE = {("pause", "paused"), ("resume", "running")}


class Container(Protocol):
    """The part of docker.models.containers.Container this backend uses."""

    name: str
    labels: dict[str, str]
    status: str

    def kill(self) -> None: ...
    def stop(self, *, timeout: int) -> None: ...
    def pause(self) -> None: ...
    def unpause(self) -> None: ...
    def start(self) -> None: ...
    def restart(self, *, timeout: int) -> None: ...
    def logs(self, *, stdout: bool, stderr: bool) -> bytes: ...


def engine_errors() -> tuple[type[Exception], ...]:
    # requests' errors (the engine went away mid-call) are OSErrors; the SDK's own are not.
    try:
        from docker.errors import DockerException
    except ImportError:
        return (OSError,)
    return (cast(type[Exception], DockerException), OSError)


def one_line(exc: Exception) -> str:
    text = getattr(exc, "explanation", None) or str(exc) or type(exc).__name__
    return " ".join(str(text).split())


def connect_docker() -> Any:
    """A Docker SDK client for the engine the environment names (DOCKER_HOST, else the default
    socket), checked with a ping; ChaosError when there is no engine to talk to."""
    host = os.environ.get("DOCKER_HOST")
    where = f"{host} (from DOCKER_HOST)" if host else f"the default socket {DEFAULT_SOCKET}"
    advice = (
        "the compose backend needs a running Docker engine; without one, use the process-mode "
        "cluster (--dir DIR)"
    )
    try:
        import docker
    except ImportError:
        raise ChaosError(
            f"the Docker SDK for Python is not installed (`docker`): {advice}"
        ) from None
    try:
        client = docker.from_env()
        client.ping()
    except engine_errors() as exc:
        raise ChaosError(
            f"no Docker engine reachable at {where}: {advice} [{one_line(exc)}]"
        ) from None
    return client


FREEZE_TRIES = 3  # runc's freeze can fail under load ("unable to freeze"); it is tried again


def must_act(action: str, state: NodeState, name: str, why: str) -> bool:
    """ChaosBackend's rules: False when the action changes nothing in `state` (pause of a paused
    node, resume of a running one); a ChaosError naming `why` when it cannot act in it."""
    if (action, state) in NO_CHANGE:
        return False
    if state not in NEEDS[action]:
        is_now = "already running" if action == "start" else "not running"
        raise ChaosError(f"{name} is {is_now} ({why})")
    return True


def pause_container(c: Container) -> None:
    """`docker pause`, tried again when the kernel's freezer could not stop every process at
    once (a process in uninterruptible sleep: seen on a busy machine, 2026-11-29)."""
    for attempt in range(1, FREEZE_TRIES + 1):
        try:
            c.pause()
            return
        except engine_errors() as exc:
            if "unable to freeze" not in str(exc) or attempt == FREEZE_TRIES:
                raise
            time.sleep(0.5)


class ComposeBackend:
    """Acts on the containers of compose project `project` (see ChaosBackend); `client` is a
    Docker SDK client, by default `docker.from_env()`."""

    kind = "compose"

    def __init__(self, project: str, zk_connect: str, client: Any | None = None) -> None:
        self.project = project
        self.zk_connect = zk_connect
        self._client = client if client is not None else connect_docker()

    def _engine(self, what: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except engine_errors() as exc:
            raise ChaosError(f"{what}: the Docker engine said: {one_line(exc)}") from None

    def _containers(self) -> tuple[list[tuple[Node, Container]], list[str]]:
        """The project's node containers with their node, from a fresh listing, and the names
        of every container listed (for errors)."""
        found: list[Container] = self._engine(
            f"listing the containers of {self._where()}",
            lambda: self._client.containers.list(
                all=True, filters={"label": [f"{PROJECT_LABEL}={self.project}"]}
            ),
        )
        out = []
        for c in found:
            labels = c.labels or {}
            role = labels.get(ROLE_LABEL)
            if labels.get(ONEOFF_LABEL) == "True" or role not in ROLES:
                continue  # `compose run` one-offs, the load generator, foreign services
            raw_id = labels.get(NODE_ID_LABEL, "")
            if role != "zookeeper" and not raw_id.isdigit():
                raise ChaosError(
                    f"container {c.name} of {self._where()} has {ROLE_LABEL}={role} but no "
                    f"numeric {NODE_ID_LABEL} label"
                )
            node_id = int(raw_id) if raw_id.isdigit() else None
            out.append((Node(node_name(role, node_id), role, node_id), c))
        return out, sorted(c.name for c in found)

    def _where(self) -> str:
        return f"compose project {self.project!r}"

    def _container(self, name: str) -> Container:
        pairs, listed = self._containers()
        if not pairs:
            found = f"found: {', '.join(listed)}" if listed else "no container at all"
            raise ChaosError(
                f"no container of {self._where()} carries a {ROLE_LABEL} label ({found}); "
                f"is it up? (`docker compose -p {self.project} ps`)"
            )
        node_or_raise([n for n, _ in pairs], name, self._where())  # names the nodes found
        matches = [c for n, c in pairs if n.name == name]
        if len(matches) > 1:
            names = ", ".join(sorted(c.name for c in matches))
            raise ChaosError(f"several containers of {self._where()} are {name}: {names}")
        return matches[0]

    def nodes(self) -> list[Node]:
        return [n for n, _ in self._containers()[0]]

    def names(self) -> list[str]:
        return [n.name for n in self.nodes()]

    def node(self, name: str) -> Node:
        return node_or_raise(self.nodes(), name, self._where())

    def state(self, name: str) -> NodeState:
        return STATES.get(str(self._container(name).status), "dead")

    def describe(self, name: str) -> str:
        c = self._container(name)
        return f"container {c.name}, service {c.labels.get(SERVICE_LABEL, '?')}"

    def _do(self, action: str, name: str, call: Callable[[Container], None]) -> None:
        c = self._container(name)
        state = STATES.get(str(c.status), "dead")
        if not must_act(action, state, name, f"container {c.name} is {c.status}"):
            return
        self._engine(f"{action} {name} (container {c.name})", lambda: call(c))

    def kill(self, name: str) -> None:
        self._do("kill", name, lambda c: c.kill())

    def stop(self, name: str) -> None:
        self._do("stop", name, lambda c: c.stop(timeout=STOP_GRACE_S))

    def pause(self, name: str) -> None:
        self._do("pause", name, pause_container)

    def resume(self, name: str) -> None:
        self._do("resume", name, lambda c: c.unpause())

    def start(self, name: str) -> None:
        self._do("start", name, lambda c: c.start())

    def restart(self, name: str) -> None:
        self._do("restart", name, lambda c: c.restart(timeout=STOP_GRACE_S))

    def health(self) -> dict[str, str]:
        """Every long-running container of the project (one-offs excluded) by compose service:
        "healthy", "unhealthy", "starting" (Docker's health states), "running" (up, no health
        check), its stopped state ("exited", "created", ...), or for a set-up service
        "completed" (exited 0) or "failed"."""
        found: list[Any] = self._engine(
            f"listing the containers of {self._where()}",
            lambda: self._client.containers.list(
                all=True, filters={"label": [f"{PROJECT_LABEL}={self.project}"]}
            ),
        )
        out = {}
        for c in found:
            if (c.labels or {}).get(ONEOFF_LABEL) == "True":
                continue
            state = c.attrs.get("State") or {}
            status = str(state.get("Status") or c.status)
            health = (state.get("Health") or {}).get("Status")
            if (c.labels or {}).get(ROLE_LABEL) == SETUP_ROLE and status == "exited":
                # A one-shot set-up service (the secure profile's `security`) has done its job.
                status = COMPLETED if state.get("ExitCode") == 0 else "failed"
            out[c.labels.get(SERVICE_LABEL, c.name)] = (
                health if status == "running" and health else status
            )
        return dict(sorted(out.items()))

    def node_logs(self) -> dict[str, str]:
        """Every broker's and controller's container log (its JSON event lines, every life of
        the container: they survive kill, stop and restart until `down`) by node name."""
        out = {}
        for n, c in self._containers()[0]:
            if n.role in ("broker", "controller"):
                raw: bytes = self._engine(
                    f"reading the log of {n.name} (container {c.name})",
                    functools.partial(c.logs, stdout=True, stderr=True),
                )
                out[n.name] = raw.decode(errors="replace")
        return out

    # ---- network faults (minibroker/chaos/compose_network.py) -------------------------------

    def _members(self) -> list[Member]:
        return [member(n, c, c.labels.get(SERVICE_LABEL, n.name)) for n, c in self._containers()[0]]

    def _network(self) -> ComposeNetwork:
        return ComposeNetwork(self._client, self.project, self._engine)

    def network_fault(self, fault: NetworkFault) -> list[str]:
        members = self._members()
        node_or_raise([m.node for m in members], fault.name, self._where())
        target = next(m for m in members if m.node.name == fault.name)
        return self._network().cut(fault, target, members)

    def heal_network(self, name: str | None = None) -> list[str]:
        members = self._members()
        if name is not None:
            node_or_raise([m.node for m in members], name, self._where())
        network = self._network()
        healed = []
        for m in members:
            if name is None or m.node.name == name:
                healed += network.heal(m)
        return healed
