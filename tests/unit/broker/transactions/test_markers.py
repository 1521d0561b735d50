"""Markers to the leaders and their answers (Kafka 2.6's TransactionMarkerRequestCompletion
HandlerTest: shouldRemoveTopicPartitionFromWaitingSetOnUnsupportedForMessageFormat,
shouldRetryPartitionWhenNotLeaderForPartitionError, shouldAbortSendingIfEpochChanged,
shouldCompleteDelayedOperationWhenNoErrors...)."""

from __future__ import annotations

from broker.transactions.markers import Outcome, PendingMarkers, outcome
from minibroker.core.errors import ErrorCode

E = ErrorCode
A0, A1, B0 = ("a", 0), ("a", 1), ("b", 0)


def pending() -> PendingMarkers:
    return PendingMarkers("tx", 7, 2, 0, True, {A0, A1, B0})


def test_requests_go_to_each_leader_and_leaderless_partitions_wait() -> None:
    leaders = {A0: 1, A1: 2, B0: None}
    assert pending().requests(leaders.get) == {1: [A0], 2: [A1]}


def test_answers_finish_partitions_and_retry_the_retriable() -> None:
    p = pending()
    assert p.answered({A0: E.NONE, A1: E.NOT_LEADER_OR_FOLLOWER}) == []
    assert p.remaining == {A1, B0} and not p.complete
    p.answered({A1: E.NONE, B0: E.UNSUPPORTED_VERSION})  # dropped from the wait
    assert p.complete


def test_a_fenced_producer_or_coordinator_cancels_the_sending() -> None:
    p = pending()
    p.answered({A0: E.TRANSACTION_COORDINATOR_FENCED})
    assert p.cancelled and not p.complete and p.requests(lambda tp: 1) == {}


def test_unexpected_errors_are_said_and_retried() -> None:
    p = pending()
    assert p.answered({A0: E.CORRUPT_MESSAGE}) == [
        "a-0: unexpected CORRUPT_MESSAGE for a marker; retrying"
    ]
    assert A0 in p.remaining
    assert outcome(E.REQUEST_TIMED_OUT) == Outcome.RETRY
    assert outcome(E.INVALID_PRODUCER_EPOCH) == Outcome.CANCEL
