"""The controller's in-memory view of the cluster (Kafka's ControllerContext), loaded from
ZooKeeper at failover and kept current by the events the controller processes."""

from __future__ import annotations

from dataclasses import dataclass, field

from controller.logic.deletion import TopicDeletions
from controller.logic.reassignment import ReplicaAssignment
from minibroker.core.listeners import Endpoint
from minibroker.core.types import LeaderAndIsr, TopicPartition


@dataclass(frozen=True)
class BrokerInfo:
    broker_id: int
    epoch: int  # czxid of /brokers/ids/<id>
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()  # every advertised listener, for UpdateMetadata


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = 0
    live_brokers: dict[int, BrokerInfo] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    # Every partition's replicas, in assignment order; during a reassignment the full set
    # RS = TRS ++ ORS, whose adding and removing replicas are in `reassigning`.
    assignments: dict[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    reassigning: dict[TopicPartition, ReplicaAssignment] = field(default_factory=dict)
    states: dict[TopicPartition, LeaderAndIsr] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    deletions: TopicDeletions = field(default_factory=TopicDeletions)

    def live_or_shutting_down(self) -> set[int]:
        """Every registered broker: the recipients of UpdateMetadata (reference §5.4)."""
        return set(self.live_brokers)

    def online(self) -> set[int]:
        """Brokers whose replicas count as online: live and not shutting down (§5.4)."""
        return set(self.live_brokers) - self.shutting_down

    def topics(self) -> set[str]:
        return {tp.topic for tp in self.assignments}

    def partitions_of(self, topic: str) -> list[TopicPartition]:
        return sorted(tp for tp in self.assignments if tp.topic == topic)

    def partitions_on(self, broker_id: int) -> list[TopicPartition]:
        return sorted(tp for tp, replicas in self.assignments.items() if broker_id in replicas)

    def offline_partitions(self) -> list[TopicPartition]:
        """Partitions with a state whose leader is not an online broker (a topic being deleted
        has none: its partitions are offline for good, reference: onReplicasBecomeOffline)."""
        online = self.online()
        return sorted(
            tp
            for tp, s in self.states.items()
            if s.leader not in online and not self.deletions.is_queued(tp.topic)
        )

    def full_assignment(self, tp: TopicPartition) -> ReplicaAssignment:
        """Kafka's partitionFullReplicaAssignment: RS with its adding and removing replicas."""
        return self.reassigning.get(tp) or ReplicaAssignment(self.assignments.get(tp, ()))

    def set_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        self.assignments[tp] = assignment.replicas
        if assignment.is_being_reassigned:
            self.reassigning[tp] = assignment
        else:
            self.reassigning.pop(tp, None)

    def remove_topic(self, topic: str) -> None:
        for tp in self.partitions_of(topic):
            self.assignments.pop(tp, None)
            self.reassigning.pop(tp, None)
            self.states.pop(tp, None)
        self.topic_configs.pop(topic, None)

    def unclean_allowed(self, topic: str, broker_default: bool) -> bool:
        raw = self.topic_configs.get(topic, {}).get("unclean.leader.election.enable")
        return broker_default if raw is None else raw.strip().lower() == "true"
