"""A decided transaction's markers on their way to the partitions' leaders, as Kafka 2.6's
TransactionMarkerChannelManager and TransactionMarkerRequestCompletionHandler handle them. Pure.

Once PrepareCommit/PrepareAbort is written, the coordinator sends one WriteTxnMarkers request
per leader, naming that leader's partitions of the transaction. Per partition the answer is:
- NONE: the marker is in that partition's log; the partition is done;
- UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS(_AFTER_APPEND),
  REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR: sent again (to the partition's leader then);
- INVALID_PRODUCER_EPOCH, TRANSACTION_COORDINATOR_FENCED: the producer or coordinator moved on;
  this coordinator stops sending this transaction's markers (its successor finishes it);
- UNSUPPORTED_VERSION: the partition is dropped from the wait (Kafka's other such code,
  UNSUPPORTED_FOR_MESSAGE_FORMAT, never arises: minibroker's logs hold magic 2 only);
- anything else: Kafka throws (an unexpected error); here it is retried, and said.
When every partition is done, the coordinator writes CompleteCommit/CompleteAbort. A partition
whose leader is unknown waits until metadata names one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from minibroker.core.errors import ErrorCode

E = ErrorCode
TopicPartition = tuple[str, int]


class Outcome(enum.Enum):
    DONE = "done"
    RETRY = "retry"
    CANCEL = "cancel"
    DROP = "drop"
    UNEXPECTED = "unexpected"


_RETRY = frozenset(
    {
        E.UNKNOWN_TOPIC_OR_PARTITION,
        E.NOT_LEADER_OR_FOLLOWER,
        E.NOT_ENOUGH_REPLICAS,
        E.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        E.REQUEST_TIMED_OUT,
        E.KAFKA_STORAGE_ERROR,
    }
)
_CANCEL = frozenset({E.INVALID_PRODUCER_EPOCH, E.TRANSACTION_COORDINATOR_FENCED})
_DROP = frozenset({E.UNSUPPORTED_VERSION})


def outcome(error: ErrorCode) -> Outcome:
    if error == E.NONE:
        return Outcome.DONE
    if error in _RETRY:
        return Outcome.RETRY
    if error in _CANCEL:
        return Outcome.CANCEL
    if error in _DROP:
        return Outcome.DROP
    return Outcome.UNEXPECTED


@dataclass
class PendingMarkers:
    """One transaction's markers: what is left to write, and to which leaders."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    remaining: set[TopicPartition] = field(default_factory=set)
    cancelled: bool = False

    def requests(
        self, leader_of: Callable[[TopicPartition], int | None]
    ) -> dict[int, list[TopicPartition]]:
        """The partitions still waiting, by their leader's broker id (those without a leader
        wait for the next round)."""
        out: dict[int, list[TopicPartition]] = {}
        if self.cancelled:
            return out
        for tp in sorted(self.remaining):
            leader = leader_of(tp)
            if leader is not None:
                out.setdefault(leader, []).append(tp)
        return out

    def answered(self, errors: Mapping[TopicPartition, ErrorCode]) -> list[str]:
        """Apply one leader's answer; the lines worth logging (unexpected errors)."""
        notes = []
        for tp, error in errors.items():
            o = outcome(error)
            if o in (Outcome.DONE, Outcome.DROP):
                self.remaining.discard(tp)
            elif o == Outcome.CANCEL:
                self.cancelled = True
            elif o == Outcome.UNEXPECTED:
                notes.append(f"{tp[0]}-{tp[1]}: unexpected {error.name} for a marker; retrying")
        return notes

    @property
    def complete(self) -> bool:
        """Every marker written: the Complete state may be written now."""
        return not self.cancelled and not self.remaining
