"""Where a swarm's engines are: the manager (schedules, knows every task) and each node's own
engine (where a task's container lives, so where a fault on it is carried out).

    DOCKER_HOST=ssh://me@machine-1                      # a manager, as the docker CLI takes it
    MINIBROKER_SWARM_ENGINES=node-1=ssh://me@machine-1,node-2=ssh://me@machine-2,...

Node names are the swarm's (`docker node ls`: each machine's hostname). `minibroker swarm lab up`
prints both for the lab's engines.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from minibroker.chaos.backend import ChaosError

ENGINES_VARIABLE = "MINIBROKER_SWARM_ENGINES"
DEFAULT_MANAGER = "unix:///var/run/docker.sock"
DEFAULT_STACK = "minibroker"  # the stack name deploy/SWARM.md deploys under


@dataclass(frozen=True)
class SwarmAccess:
    manager: str
    engines: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_environment(cls, env: Mapping[str, str] | None = None) -> SwarmAccess:
        env = os.environ if env is None else env
        return cls(
            env.get("DOCKER_HOST") or DEFAULT_MANAGER, parse_engines(env.get(ENGINES_VARIABLE, ""))
        )

    def engine(self, node: str) -> str:
        if node not in self.engines:
            have = f" (it names {', '.join(sorted(self.engines))})" if self.engines else ""
            raise ChaosError(
                f"no Docker engine known for swarm node {node!r}: set {ENGINES_VARIABLE}="
                f"{node}=ssh://USER@MACHINE,... for every node{have}"
            )
        return self.engines[node]

    def exports(self) -> str:
        """The shell lines that give a later command this access."""
        engines = ",".join(f"{k}={v}" for k, v in sorted(self.engines.items()))
        return f"export DOCKER_HOST={self.manager}\nexport {ENGINES_VARIABLE}={engines}"


def parse_engines(text: str) -> dict[str, str]:
    """`node-1=unix:///...,node-2=ssh://...` -> {node: address}; one line's error otherwise."""
    out: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        node, sep, address = item.partition("=")
        if not sep or not node.strip() or not address.strip():
            raise ChaosError(
                f"{ENGINES_VARIABLE}: {item!r} is not NODE=DOCKER_ADDRESS "
                "(e.g. node-2=ssh://me@machine-2)"
            )
        out[node.strip()] = address.strip()
    return out
