"""Partition reassignment's sets and decisions (KIP-455), as small pure functions: Kafka 2.6's
ReplicaAssignment (`kafka/controller/ControllerContext.scala`) and the checks of
`KafkaController.validateReplicas`, `isReassignmentComplete` and the reassignment leader
election (`Election.scala`, ReassignPartitionLeaderElectionStrategy).

RS = the replicas written in /brokers/topics/<t> during a move, AR = adding, RR = removing;
origin ORS = RS - AR, target TRS = RS - RR. Reassigning to a target writes RS = TRS ++ ORS
(distinct, target first), so {1,2,3} -> {4,5,6} is RS [4,5,6,1,2,3], AR [4,5,6], RR [1,2,3].
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from minibroker.core.errors import ErrorCode


def _distinct(items: Sequence[int]) -> tuple[int, ...]:
    return tuple(dict.fromkeys(items))


@dataclass(frozen=True)
class ReplicaAssignment:
    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @property
    def origin(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.adding)

    @property
    def target(self) -> tuple[int, ...]:
        return tuple(r for r in self.replicas if r not in self.removing)

    @property
    def is_being_reassigned(self) -> bool:
        return bool(self.adding or self.removing)

    def reassign_to(self, target: Sequence[int]) -> ReplicaAssignment:
        """Kafka's reassignTo: RS = (target ++ origin).distinct, AR = RS - origin,
        RR = RS - target. Reassigning to the origin cancels (AR = RR = [])."""
        full = _distinct([*target, *self.origin])
        origin = set(self.origin)
        wanted = set(target)
        return ReplicaAssignment(
            full,
            tuple(r for r in full if r not in origin),
            tuple(r for r in full if r not in wanted),
        )

    def completed(self) -> ReplicaAssignment:
        """B2: RS = TRS, nothing adding or removing."""
        return ReplicaAssignment(self.target)


def is_complete(assignment: ReplicaAssignment, isr: Collection[int]) -> bool:
    """isReassignmentComplete: nothing to move, or every target replica is in the ISR."""
    return not assignment.is_being_reassigned or set(assignment.target) <= set(isr)


def validate_replicas(
    target: Sequence[int], current: ReplicaAssignment, live_brokers: Collection[int]
) -> tuple[ErrorCode, str] | None:
    """validateReplicas for an API reassignment: INVALID_REPLICA_ASSIGNMENT (with Kafka's
    message) when the list is empty, repeats a broker, holds a negative id, or adds a replica
    on a broker that is not alive; None when it is acceptable."""
    if not target:
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Empty replica list specified in partition reassignment.",
        )
    shown = "List(" + ", ".join(str(r) for r in target) + ")"
    if len(set(target)) != len(target):
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Duplicate replica ids in partition reassignment replica list: {shown}",
        )
    if any(r < 0 for r in target):
        return ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Invalid broker id in replica list: {shown}"
    adding = current.reassign_to(target).adding
    if not set(adding) <= set(live_brokers):
        return (
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "Replica assignment has brokers that are not alive. Replica list: "
            f"{list(adding)}, live broker list: {sorted(live_brokers)}",
        )
    return None


def build_reassignment(
    current: ReplicaAssignment, target: Sequence[int] | None
) -> ReplicaAssignment | None:
    """maybeBuildReassignment: the assignment a request asks for. A cancellation (None) of a
    partition being moved goes back to its origin; of one not being moved there is nothing to
    do (None: NO_REASSIGNMENT_IN_PROGRESS)."""
    if target is None:
        return current.reassign_to(current.origin) if current.is_being_reassigned else None
    return current.reassign_to(target)


def reassignment_leader(
    target: Sequence[int], isr: Collection[int], online: Collection[int]
) -> int | None:
    """ReassignPartitionLeaderElectionStrategy: the first target replica that is online and
    in the ISR, or None."""
    return next((b for b in target if b in online and b in isr), None)
