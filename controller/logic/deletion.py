"""Topic deletion's bookkeeping and decisions (Kafka 2.6's TopicDeletionManager,
`kafka/controller/TopicDeletionManager.scala`), pure: the controller's shell performs the plans.

Theory of operation. A topic named in /admin/delete_topics is queued. It is *eligible* while no
replica of it is being deleted and nothing halted it (a dead replica, a failed StopReplica, a
reassignment of one of its partitions). Each round (`resume`):
  1. a topic whose every replica was deleted is complete: its znodes go;
  2. a topic with no deletion in flight but a failed replica is retried (the failed replicas are
     forgotten, so that they are started again);
  3. every eligible topic starts: its partitions go offline (UpdateMetadata with leader -2,
     again each round); each live replica not yet deleted gets StopReplica(delete=false) then
     StopReplica(delete=true) and is marked started; a dead replica is marked ineligible and
     halts the topic until its broker returns (`resume_topics` on broker start-up).
A StopReplica answer moves a started replica to deleted (or ineligible on an error); a broker's
death moves its replicas of queued topics to ineligible.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from enum import Enum

from minibroker.core.types import TopicPartition

Replica = tuple[TopicPartition, int]  # a partition on a broker (Kafka's PartitionAndReplica)


class ReplicaDeletion(Enum):
    STARTED = "ReplicaDeletionStarted"
    SUCCESSFUL = "ReplicaDeletionSuccessful"
    INELIGIBLE = "ReplicaDeletionIneligible"


@dataclass(frozen=True)
class DeletionPlan:
    """What one round asks the shell to do."""

    complete: tuple[str, ...] = ()  # topics whose znodes and state go now
    offline: tuple[TopicPartition, ...] = ()  # partitions going offline for good (leader -2)
    stop: tuple[Replica, ...] = ()  # StopReplica(delete=false), then (delete=true)
    halted: tuple[str, ...] = ()  # topics that wait for a dead replica's broker

    def empty(self) -> bool:
        return not (self.complete or self.offline or self.stop or self.halted)


@dataclass
class TopicDeletions:
    enabled: bool = True
    queued: set[str] = field(default_factory=set)
    ineligible: set[str] = field(default_factory=set)
    started: set[str] = field(default_factory=set)  # topics whose deletion began
    states: dict[Replica, ReplicaDeletion] = field(default_factory=dict)

    def is_queued(self, topic: str) -> bool:
        return self.enabled and topic in self.queued

    def enqueue(self, topics: Iterable[str]) -> None:
        if self.enabled:
            self.queued.update(topics)

    def halt(self, topics: Iterable[str]) -> set[str]:
        """markTopicIneligibleForDeletion; the queued topics it halted."""
        halted = set(topics) & self.queued
        self.ineligible |= halted
        return halted

    def resume_topics(self, topics: Iterable[str]) -> None:
        """resumeDeletionForTopics: a broker came back, a reassignment ended."""
        self.ineligible -= set(topics) & self.queued

    def fail(self, replicas: Iterable[Replica]) -> set[str]:
        """failReplicaDeletion: these replicas could not be deleted; their topics halt. A
        replica already deleted stays deleted (ReplicaDeletionIneligible is reached only from
        OfflineReplica or ReplicaDeletionStarted, ReplicaStateMachine's table)."""
        failed = [
            r
            for r in replicas
            if self.is_queued(r[0].topic) and self.states.get(r) is not ReplicaDeletion.SUCCESSFUL
        ]
        for r in failed:
            self.states[r] = ReplicaDeletion.INELIGIBLE
        return self.halt({r[0].topic for r in failed})

    def succeed(self, replicas: Iterable[Replica]) -> None:
        """completeReplicaDeletion: only a replica whose deletion started is deleted."""
        for r in replicas:
            if self.is_queued(r[0].topic) and self.states.get(r) is ReplicaDeletion.STARTED:
                self.states[r] = ReplicaDeletion.SUCCESSFUL

    def _in_state(self, replicas: Collection[Replica], state: ReplicaDeletion) -> list[Replica]:
        return [r for r in replicas if self.states.get(r) is state]

    def resume(
        self,
        replicas_of: Callable[[str], list[Replica]],
        online: Callable[[Replica], bool],
    ) -> DeletionPlan:
        """resumeDeletions: one round (see the module's theory of operation)."""
        if not self.enabled:
            return DeletionPlan()
        complete, retry, eligible = [], [], []
        for topic in sorted(self.queued):
            replicas = replicas_of(topic)
            if all(self.states.get(r) is ReplicaDeletion.SUCCESSFUL for r in replicas):
                complete.append(topic)
                continue
            in_flight = self._in_state(replicas, ReplicaDeletion.STARTED)
            if not in_flight and self._in_state(replicas, ReplicaDeletion.INELIGIBLE):
                retry.append(topic)
            if not in_flight and topic not in self.ineligible:
                eligible.append(topic)
        for topic in retry:
            for r in self._in_state(replicas_of(topic), ReplicaDeletion.INELIGIBLE):
                del self.states[r]  # back to "offline", to be started again
        for topic in complete:
            self._forget(topic, replicas_of(topic))
        offline: list[TopicPartition] = []
        stop: list[Replica] = []
        halted: list[str] = []
        for topic in eligible:
            replicas = replicas_of(topic)
            # Every round re-sends the leader -2 UpdateMetadata (onTopicDeletion).
            self.started.add(topic)
            offline += sorted({tp for tp, _ in replicas})
            dead = [
                r
                for r in replicas
                if not online(r) and self.states.get(r) is not ReplicaDeletion.SUCCESSFUL
            ]
            for r in dead:
                self.states[r] = ReplicaDeletion.INELIGIBLE
            for r in replicas:
                if online(r) and self.states.get(r) is not ReplicaDeletion.SUCCESSFUL:
                    self.states[r] = ReplicaDeletion.STARTED
                    stop.append(r)
            if dead:
                self.ineligible.add(topic)
                halted.append(topic)
        return DeletionPlan(tuple(complete), tuple(offline), tuple(stop), tuple(halted))

    def _forget(self, topic: str, replicas: Iterable[Replica]) -> None:
        self.queued.discard(topic)
        self.ineligible.discard(topic)
        self.started.discard(topic)
        for r in replicas:
            self.states.pop(r, None)
