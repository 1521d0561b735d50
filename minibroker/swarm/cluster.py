"""`minibroker cluster up/status/down --swarm`: deploy/stack.yml as a stack on a swarm, waited on
until every service is healthy, shown task by task, and removed with its volumes on every node
(`docker stack rm` leaves volumes; `down` takes them as compose's `down -v` does)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

from minibroker import topology as t
from minibroker.chaos.backend import ChaosError
from minibroker.chaos.compose import engine_errors, one_line
from minibroker.localcluster import ClusterError
from minibroker.swarm import stack as st
from minibroker.swarm.access import SwarmAccess
from minibroker.swarm.backend import SwarmBackend

NAMESPACE_LABEL = "com.docker.stack.namespace"


def find_stack_file(start: Path | None = None) -> Path:
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / st.STACK_FILE).is_file():
            return folder / st.STACK_FILE
    raise ChaosError(f"no {st.STACK_FILE} here or above: run this in a checkout, or give --file")


def up(
    name: str, stack_file: Path, access: SwarmAccess, env: Mapping[str, str], timeout_s: float
) -> str:
    """`docker stack deploy` on the manager, then a wait until every service is healthy."""
    backend = SwarmBackend(name, "", access)
    started = time.monotonic()
    st.deploy(access.manager, name, stack_file, env)
    try:
        backend.stack.wait_healthy(timeout_s)
    except ClusterError as exc:
        raise ChaosError(
            f"{exc}; every node needs the images (deploy/SWARM.md, `docker save | docker load`) "
            f"and its label; `docker -H {access.manager} stack ps {name} --no-trunc` says more"
        ) from None
    took = time.monotonic() - started
    return f"stack {name} healthy in {took:.1f} s\n{render_status(name, backend.status())}"


def status(name: str, access: SwarmAccess) -> list[dict[str, str]]:
    return SwarmBackend(name, "", access).status()


def render_status(name: str, rows: list[dict[str, str]]) -> str:
    lines = [f"stack {name}", f"{'SERVICE':<14}{'NODE':<12}{'TASK':<11}HEALTH"]
    lines += [f"{r['service']:<14}{r['node']:<12}{r['task']:<11}{r['health']}" for r in rows]
    return "\n".join(lines)


def _brokers_first(name: str, access: SwarmAccess, deadline: float) -> None:
    """Remove the brokers' services before the rest, and wait until their containers are gone
    on every engine named: a broker's controlled shutdown needs the controller, which `docker
    stack rm` would take down at the same time (each broker then waits out its 30 s
    stop_grace_period)."""
    stack = st.Stack(name, access)
    for service in stack.services():
        if stack.container_labels(service).get(t.ROLE_LABEL) == "broker":
            stack.service(service).remove()
    brokers = {"label": [f"{NAMESPACE_LABEL}={name}", f"{t.ROLE_LABEL}=broker"]}
    for node in sorted(access.engines):
        try:
            client = stack.engine(node)
            while client.containers.list(filters=brokers) and time.monotonic() < deadline:
                time.sleep(0.5)  # a machine the managers cannot reach keeps its broker: go on
        except engine_errors():
            continue  # its machine is gone: nothing of it to wait for


def down(name: str, access: SwarmAccess, timeout_s: float = 120) -> str:
    """`docker stack rm`, a wait until no container of it is left on any engine named in
    `access`, then its volumes there. The lines to print."""
    where = {"label": f"{NAMESPACE_LABEL}={name}"}
    started = time.monotonic()
    _brokers_first(name, access, started + timeout_s / 2)
    st.remove(access.manager, name)
    deadline = started + timeout_s
    removed: list[str] = []
    unreachable: list[str] = []
    left: list[str] = []
    for node, address in sorted(access.engines.items()):
        try:
            client = st.client_for(address)
            while client.containers.list(all=True, filters=where):
                if time.monotonic() > deadline:
                    left.append(node)
                    break
                time.sleep(0.5)
            else:
                for v in client.volumes.list(filters=where):
                    v.remove(force=True)
                    removed.append(f"{node}:{v.name}")
        except engine_errors() as exc:
            unreachable.append(f"{node} ({one_line(exc)})")
    lines = [f"stack {name} removed"]
    if removed:
        lines.append(f"volumes removed: {', '.join(removed)}")
    if not access.engines:
        lines.append(
            "volumes left on the nodes (no engines named): remove them on each node, or set "
            "MINIBROKER_SWARM_ENGINES"
        )
    if unreachable:
        lines.append(f"engines not reached (their volumes stay): {', '.join(unreachable)}")
    if left:
        lines.append(
            f"containers of the stack still on {', '.join(left)} after {timeout_s:.0f} s (a "
            "machine the managers cannot reach keeps its tasks): their volumes stay"
        )
        raise ChaosError("; ".join(lines))
    return "\n".join(lines)
