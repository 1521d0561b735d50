"""The requests one controller action sends (Kafka's ControllerBrokerRequestBatch, §5.9):
LeaderAndIsr per broker, UpdateMetadata partitions for every registered broker, StopReplica per
broker — accumulated while deciding, then sent in that order."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from minibroker.core.types import TopicPartition


@dataclass(frozen=True)
class StopReplicaEntry:
    tp: TopicPartition
    leader_epoch: int
    delete: bool


@dataclass
class RequestBatch:
    leader_and_isr: dict[int, set[TopicPartition]] = field(default_factory=dict)
    is_new: set[TopicPartition] = field(default_factory=set)
    # UpdateMetadata: recipients and the partitions it carries (an empty set still informs the
    # recipients about the live brokers).
    update_metadata_to: set[int] = field(default_factory=set)
    update_metadata_partitions: set[TopicPartition] = field(default_factory=set)
    stop_replica: dict[int, list[StopReplicaEntry]] = field(default_factory=dict)

    def add_leader_and_isr(
        self,
        brokers: Iterable[int],
        tp: TopicPartition,
        registered: Iterable[int],
        *,
        is_new: bool = False,
    ) -> None:
        """LeaderAndIsr for `tp` to `brokers`, and — as Kafka always does with it —
        UpdateMetadata for `tp` to every registered broker."""
        for b in brokers:
            self.leader_and_isr.setdefault(b, set()).add(tp)
        if is_new:
            self.is_new.add(tp)
        self.add_update_metadata(registered, [tp])

    def add_update_metadata(self, brokers: Iterable[int], tps: Iterable[TopicPartition]) -> None:
        self.update_metadata_to.update(brokers)
        self.update_metadata_partitions.update(tps)

    def add_stop_replica(
        self, broker: int, tp: TopicPartition, leader_epoch: int, delete: bool
    ) -> None:
        self.stop_replica.setdefault(broker, []).append(StopReplicaEntry(tp, leader_epoch, delete))

    def empty(self) -> bool:
        return not (self.leader_and_isr or self.update_metadata_to or self.stop_replica)
