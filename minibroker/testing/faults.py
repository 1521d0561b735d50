"""Applying a fault to a node named directly (`"broker-2"`) or by role (`leader_of(...)`,
resolved now, at the moment it is applied), through the chaos backend the CLI uses; each
returns what it did."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Literal

from minibroker.chaos import ChaosBackend, ChaosError, NetworkFault, perform
from minibroker.testing.roles import ClusterReader, Role

Target = str | Role
NODE_ACTIONS = ("kill", "stop", "pause", "resume", "start", "restart")
NETWORK_ACTIONS = ("cut", "delay", "throttle", "heal")
_NETWORK_KINDS: dict[str, Literal["cut", "delay", "throttle"]] = {
    "cut": "cut", "delay": "delay", "throttle": "throttle",
}  # fmt: skip


@dataclass(frozen=True)
class Action:
    """A fault as applied: the action, the target as given (`"the leader of orders-0"`), the
    node it resolved to, why (`"the leader of orders-0 (orders-0)"`), where it runs
    (`"pid 4242"`), when (epoch ms), and for network faults the links it changed."""

    action: str
    target: str
    node: str
    reason: str
    where: str
    at_ms: int
    links: tuple[str, ...] = field(default=())

    def __str__(self) -> str:
        why = f" ({self.reason})" if self.reason and self.reason != self.target else ""
        return f"{self.action} {self.node}{why}, {self.where}"


def resolve(backend: ChaosBackend, reader: ClusterReader, target: Target) -> tuple[str, str]:
    """(node name, why) of a target now; ChaosError naming the nodes there are otherwise."""
    if isinstance(target, Role):
        name, why = target.resolve(reader)
        backend.node(name)  # a node of this cluster
        return name, why
    return backend.node(target).name, ""


def apply(
    backend: ChaosBackend,
    reader: ClusterReader,
    action: str,
    target: Target | None,
    *,
    peers: tuple[str, ...] = (),
    delay_ms: int = 0,
    bytes_per_s: int = 0,
    direction: Literal["both", "out", "in"] = "both",
) -> Action:
    """Carry out `action` on `target` (None: every link, for heal)."""
    if action not in NODE_ACTIONS + NETWORK_ACTIONS:
        raise ChaosError(f"unknown fault {action!r}")
    name, why = ("", "every link") if target is None else resolve(backend, reader, target)
    where = backend.describe(name) if name else "the fault proxy"
    at_ms = int(time.time() * 1000)  # before: whatever the fault causes comes after it
    links: list[str] = []
    if action in NODE_ACTIONS:
        perform(backend, action, name)
    elif action == "heal":
        links = backend.heal_network(name or None)
    else:
        kind = _NETWORK_KINDS[action]
        fault = NetworkFault(
            kind, name, peers, delay_ms=delay_ms, bytes_per_s=bytes_per_s, direction=direction
        )
        links = backend.network_fault(fault)
    if action in ("start", "restart"):
        where = backend.describe(name)  # the new process
    return Action(
        action, str(target) if target is not None else "every link", name or "*", why, where,
        at_ms, tuple(links),
    )  # fmt: skip
