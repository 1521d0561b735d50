"""Nodes named by their role at the moment a fault is applied: `leader_of("orders", 0)`,
`follower_of("orders", 0)`, `active_controller()`, `coordinator_of(group="g")`,
`coordinator_of(transactional_id="t")`. Leaders move; a role is resolved from ZooKeeper only
when `Cluster.kill(...)` (or another fault) acts on it, never earlier.

A group's coordinator is the leader of its `__consumer_offsets` partition, a transactional id's
the leader of its `__transaction_state` partition: `abs(key.hashCode) % partitions`
(GroupMetadataManager.partitionFor, TransactionStateManager.partitionFor; Kafka 2.6).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from minibroker.chaos import ChaosError
from minibroker.chaos.backend import node_name
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.types import LeaderAndIsr, TopicPartition

OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTIONS_TOPIC = "__transaction_state"


class ClusterReader(Protocol):
    """What resolving a role reads (a ZkStore is one)."""

    def read_controller(self) -> int | None: ...

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None: ...

    def read_topic_partition_count(self, topic: str) -> int | None: ...


@dataclass(frozen=True)
class Role:
    """A node by role; `resolve` says which node it is now and why."""

    kind: str  # "leader" | "follower" | "controller" | "coordinator"
    topic: str = ""
    partition: int = 0
    key: str = ""  # a coordinator's group or transactional id

    def __str__(self) -> str:
        if self.kind == "controller":
            return "the active controller"
        if self.kind == "coordinator":
            what = "group" if self.topic == OFFSETS_TOPIC else "transactional id"
            return f"the coordinator of {what} {self.key!r}"
        return f"the {'leader' if self.kind == 'leader' else 'in-sync follower'} of " + (
            f"{self.topic}-{self.partition}"
        )

    def resolve(self, reader: ClusterReader) -> tuple[str, str]:
        """(node name, why): the node this role names now; ChaosError when none does."""
        if self.kind == "controller":
            controller = reader.read_controller()
            if controller is None:
                raise ChaosError("no controller is elected")
            return node_name("controller", controller), str(self)
        partition = self.partition
        if self.kind == "coordinator":
            count = reader.read_topic_partition_count(self.topic)
            if not count:
                raise ChaosError(
                    f"{self.topic} does not exist yet: no {self} (a client creates it on first use)"
                )
            partition = partition_for(self.key, count)
        tp = TopicPartition(self.topic, partition)
        state = reader.read_partition_state(tp)
        if state is None or state.leader < 0:
            raise ChaosError(f"{tp} has no leader, so there is no {self}")
        if self.kind == "leader":
            return f"broker-{state.leader}", str(self)
        if self.kind == "coordinator":
            return f"broker-{state.leader}", f"{self}: the leader of {tp}"
        followers = [b for b in state.isr if b != state.leader]
        if not followers:
            raise ChaosError(f"{tp} has no in-sync follower (ISR {list(state.isr)})")
        return f"broker-{followers[-1]}", str(self)


def leader_of(topic: str, partition: int = 0) -> Role:
    """The broker leading `topic`-`partition` when the fault is applied."""
    return Role("leader", topic, partition)


def follower_of(topic: str, partition: int = 0) -> Role:
    """An in-sync follower of `topic`-`partition` (the last in the ISR) when applied."""
    return Role("follower", topic, partition)


def active_controller() -> Role:
    """The controller holding /controller when the fault is applied."""
    return Role("controller")


def coordinator_of(*, group: str | None = None, transactional_id: str | None = None) -> Role:
    """The broker coordinating `group` (or `transactional_id`) when the fault is applied."""
    if (group is None) == (transactional_id is None):
        raise ValueError("give group= or transactional_id=, one of them")
    if group is not None:
        return Role("coordinator", OFFSETS_TOPIC, key=group)
    return Role("coordinator", TRANSACTIONS_TOPIC, key=str(transactional_id))
