"""What a fault's target means right now: a node name as given, or an alias read from
ZooKeeper at the moment the fault fires (leaders move, so an alias is never resolved early).

Targets: `zookeeper`, `broker-N`, `controller-N`; `controller` (the active controller, from
/controller); `leader` (the leader of partition 0 of the given topic, from its state znode) and
`follower` (that partition's last in-sync follower: pausing it shows an ISR shrink and expand);
`leader:TOPIC-P` / `follower:TOPIC-P` name the partition explicitly (Kafka's `demo-0`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Protocol

from minibroker.chaos.backend import ChaosBackend, ChaosError
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import ZNodeFormatError
from minibroker.localcluster import zk_session
from minibroker.runtime.zk_store import ZkError

ALIASES = ("leader", "follower", "controller")
_NODE = re.compile(r"zookeeper|(broker|controller)-\d+")
_PARTITION_ALIAS = re.compile(r"(?P<alias>leader|follower):(?P<topic>.+)-(?P<partition>\d+)")


class LeadershipReader(Protocol):
    """Who leads, as alias resolution needs to know it (ZkStore is one; tests pass fakes)."""

    def read_controller(self) -> int | None: ...

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None: ...


ReaderFactory = Callable[[], AbstractContextManager[LeadershipReader]]


@dataclass(frozen=True)
class Target:
    """A parsed target: a node name, or an alias (with its partition for leader/follower)."""

    text: str
    alias: str | None = None
    tp: TopicPartition | None = None


@dataclass(frozen=True)
class Resolved:
    """The node a target means now, and why in a few words ("leader of demo-0"; "" for a
    node named directly)."""

    target: str
    name: str
    reason: str = ""


def is_alias(target: str) -> bool:
    return target in ALIASES or _PARTITION_ALIAS.fullmatch(target) is not None


def is_target(text: str) -> bool:
    """Whether `text` reads as a target (a node name or an alias), whatever its topic."""
    return (
        bool(_NODE.fullmatch(text))
        or text in ("controller", "leader", "follower")
        or (_PARTITION_ALIAS.fullmatch(text) is not None)
    )


def parse_target(text: str, topic: str | None = None) -> Target:
    """Check a target's syntax; `topic` is the partition-0 topic of a bare leader/follower."""
    if _NODE.fullmatch(text):
        return Target(text)
    if text == "controller":
        return Target(text, alias="controller")
    m = _PARTITION_ALIAS.fullmatch(text)
    if m is not None:
        return Target(text, m["alias"], TopicPartition(m["topic"], int(m["partition"])))
    if text in ("leader", "follower"):
        if not topic:
            raise ChaosError(
                f"{text!r} needs a topic: give --topic TOPIC (partition 0) or "
                f"{text}:TOPIC-PARTITION, e.g. {text}:demo-0"
            )
        return Target(text, text, TopicPartition(topic, 0))
    raise ChaosError(
        f"bad target {text!r}: expected zookeeper, broker-N, controller-N, controller, "
        "leader, follower, leader:TOPIC-P or follower:TOPIC-P"
    )


def resolve_target(
    backend: ChaosBackend,
    text: str,
    *,
    topic: str | None = None,
    open_reader: ReaderFactory | None = None,
) -> Resolved:
    """The node `text` means right now. Aliases read a LeadershipReader from `open_reader()`,
    by default a ZooKeeper session at `backend.zk_connect`."""
    target = parse_target(text, topic)
    if target.alias is None:
        return Resolved(text, backend.node(text).name)  # raises naming the nodes there are
    opened = open_reader() if open_reader is not None else zk_session(backend.zk_connect)
    try:
        with opened as who:
            node_id, role, reason = _alias_node_id(target, who)
    except (ZkError, ZNodeFormatError) as exc:
        raise ChaosError(
            f"cannot resolve {text!r}: reading ZooKeeper at {backend.zk_connect} failed: {exc}"
        ) from None
    for node in backend.nodes():
        if node.role == role and node.node_id == node_id:
            return Resolved(text, node.name, reason)
    raise ChaosError(f"{text!r} is {role} {node_id}, which is not a node of this cluster")


def _alias_node_id(target: Target, who: LeadershipReader) -> tuple[int, str, str]:
    """(node id, role, reason) of an alias, or a ChaosError saying why there is none."""
    if target.alias == "controller":
        controller_id = who.read_controller()
        if controller_id is None:
            raise ChaosError("no controller is elected")
        return controller_id, "controller", "active controller"
    tp = target.tp
    assert tp is not None  # parse_target gives leader/follower a partition
    state = who.read_partition_state(tp)
    # -1 is Kafka's "no leader" (every replica offline).
    if state is None or state.leader < 0:
        raise ChaosError(f"partition {tp.partition} of topic {tp.topic!r} has no leader")
    if target.alias == "leader":
        return state.leader, "broker", f"leader of {tp}"
    followers = [b for b in state.isr if b != state.leader]
    if not followers:
        raise ChaosError(f"partition {tp.partition} of topic {tp.topic!r} has no in-sync follower")
    return followers[-1], "broker", f"in-sync follower of {tp}"
