"""deploy/stack.yml on a swarm: deploy it, find where each node's task runs, wait until every
service is healthy, and remove it. The manager's engine schedules; each task's container lives
on the engine of the node that runs it, so the engines are named by node (`engines`: node
hostname to a Docker address, `unix://...` or `ssh://user@machine`)."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker import topology as t
from minibroker.chaos.backend import ChaosError
from minibroker.localcluster import ClusterError
from minibroker.swarm.access import SwarmAccess

STACK_FILE = Path("deploy") / "stack.yml"
ROLE_LABEL = t.ROLE_LABEL
SCALED_TO_ZERO = "0 replicas"  # a service nobody scaled up: not a task to wait for


def docker_cli(
    host: str, *args: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> str:
    result = subprocess.run(
        ["docker", "-H", host, *args], capture_output=True, text=True, timeout=timeout,
        check=False, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})},
    )  # fmt: skip
    if result.returncode != 0:
        raise ClusterError(f"docker {' '.join(args[:3])}: {result.stderr.strip()}")
    return result.stdout


def deploy(manager: str, name: str, stack_file: Path, env: Mapping[str, str]) -> str:
    """`docker stack deploy` as deploy/SWARM.md runs it; its output."""
    return docker_cli(manager, "stack", "deploy", "-c", str(stack_file), name, env=env)


def remove(manager: str, name: str) -> None:
    docker_cli(manager, "stack", "rm", name)


@dataclass(frozen=True)
class Task:
    """A service's current task: where it runs and its container there ("" while none)."""

    service: str  # broker-1, zookeeper, ... (the stack's service name without the prefix)
    node: str  # the swarm node's hostname ("" while unscheduled)
    state: str  # Swarm's task state: running, failed, shutdown, ...
    container: str
    error: str = ""  # why Swarm rejected or failed it


def client_for(address: str) -> Any:
    import docker

    from minibroker.chaos.compose import engine_errors, one_line

    # ssh:// through the system's ssh client (keys, known hosts and config as the docker CLI
    # uses them) rather than paramiko.
    try:
        return docker.DockerClient(base_url=address, use_ssh_client=address.startswith("ssh://"))
    except engine_errors() as exc:
        raise ChaosError(
            f"no Docker engine answers at {address} ({one_line(exc)}): DOCKER_HOST names a "
            "swarm manager and MINIBROKER_SWARM_ENGINES each machine's engine (deploy/SWARM.md)"
        ) from None


class Stack:
    """A deployed stack `name`, through its manager's engine and every node's engine."""

    def __init__(self, name: str, access: SwarmAccess) -> None:
        self.name, self.access = name, access
        self.manager = client_for(access.manager)
        self._clients: dict[str, Any] = {}
        self._node_names: dict[str, str] = {}

    def engine(self, node: str) -> Any:
        """A Docker SDK client of the node's own engine (SwarmAccess names it)."""
        if node not in self._clients:
            self._clients[node] = client_for(self.access.engine(node))
        return self._clients[node]

    def service(self, service: str) -> Any:
        return self.manager.services.get(f"{self.name}_{service}")

    def container_labels(self, service: str) -> dict[str, str]:
        """The labels the stack file gives the service's containers (role, node id)."""
        spec = self.service(service).attrs["Spec"]["TaskTemplate"]["ContainerSpec"]
        return dict(spec.get("Labels") or {})

    def _node_name(self, node_id: str) -> str:
        if node_id not in self._node_names:
            self._node_names[node_id] = self.manager.nodes.get(node_id).attrs["Description"][
                "Hostname"
            ]
        return self._node_names[node_id]

    def services(self) -> list[str]:
        prefix = f"{self.name}_"
        found = self.manager.services.list(
            filters={"label": f"com.docker.stack.namespace={self.name}"}
        )
        return sorted(s.name.removeprefix(prefix) for s in found)

    def task(self, service: str) -> Task:
        """The service's newest task."""
        found = self.service(service).tasks()
        if not found:
            return Task(service, "", "pending", "")
        newest = max(found, key=lambda x: x.get("CreatedAt", ""))
        status = newest.get("Status") or {}
        container = (status.get("ContainerStatus") or {}).get("ContainerID", "")
        node = self._node_name(newest["NodeID"]) if newest.get("NodeID") else ""
        return Task(service, node, str(status.get("State", "")), container, status.get("Err", ""))

    def container(self, service: str) -> Any:
        """The container of the service's newest task, on its node's engine."""
        task = self.task(service)
        if not task.container:
            raise ClusterError(f"{service} has no container ({task.state})")
        return self.engine(task.node).containers.get(task.container)

    def health(self) -> dict[str, str]:
        """Each service's newest task: its container's health (or Swarm's task state)."""
        out = {}
        for service in self.services():
            if self.scaled_to_zero(service):  # the load generator and Spark until scaled up
                out[service] = SCALED_TO_ZERO
                continue
            task = self.task(service)
            state = task.state
            if task.state == "running" and task.container and task.node in self.access.engines:
                try:
                    c = self.engine(task.node).containers.get(task.container)
                    state = ((c.attrs.get("State") or {}).get("Health") or {}).get(
                        "Status"
                    ) or "running"
                except Exception as exc:  # its engine is gone (the machine died)
                    state = f"unreachable ({type(exc).__name__})"
            out[service] = state
        return out

    def scaled_to_zero(self, service: str) -> bool:
        mode = ((self.service(service).attrs.get("Spec") or {}).get("Mode")) or {}
        return (mode.get("Replicated") or {}).get("Replicas") == 0

    def wait_healthy(self, timeout_s: float = 300) -> dict[str, str]:
        deadline = time.monotonic() + timeout_s
        while True:
            health = self.health()
            if health and all(h in ("healthy", "running", SCALED_TO_ZERO) for h in health.values()):
                return health
            broken = {s: h for s, h in health.items() if h in ("failed", "rejected", "complete")}
            if broken or time.monotonic() > deadline:
                errors = {s: self.task(s).error for s in broken}
                why = "; ".join(f"{s}: {e}" for s, e in errors.items() if e)
                raise ClusterError(
                    f"stack {self.name} is not healthy: {health}" + (f" ({why})" if why else "")
                )
            time.sleep(1)
