"""A follower's state of one partition it fetches, and how long a partition waits after an
error (reference §3.8)."""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.core.errors import ErrorCode

# A deliberate deviation from Kafka, which waits replica.fetch.backoff.ms after every retriable
# partition error (reference §3.8): UNKNOWN_LEADER_EPOCH means this follower's LeaderAndIsr
# arrived before the leader's, which follows within milliseconds, so it retries soon. Waiting
# the full backoff stalled acks=all writes 500 ms-1 s in about 10% of controlled shutdowns.
EPOCH_CATCH_UP_BACKOFF_MS = 20
# Every partition of a fetch throttled (the follower quota used): look again this much later,
# as Kafka's fetcher backs off an empty fetch request by replica.fetch.backoff.ms.
THROTTLED_WAIT_S = 0.1
RETRY_LATER = frozenset(
    {
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.OFFSET_NOT_AVAILABLE,
        ErrorCode.LEADER_NOT_AVAILABLE,
    }
)


# The leader lost or refused this follower's fetch session: the next request is a full one.
SESSION_ERRORS = frozenset(
    {ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH}
)


def backoff_ms_for(error: ErrorCode | None, configured_ms: int) -> int:
    """How long a partition waits before it is fetched again after `error` (None: the whole
    request failed): replica.fetch.backoff.ms, shorter only for UNKNOWN_LEADER_EPOCH."""
    if error is ErrorCode.UNKNOWN_LEADER_EPOCH:
        return min(EPOCH_CATCH_UP_BACKOFF_MS, configured_ms)
    return configured_ms


@dataclass
class FetchState:
    fetch_offset: int
    leader_epoch: int
    truncating: bool = True
    delayed_until_ms: int = 0
    # Caught up to the leader's HW at the last answer (Kafka's isReplicaInSync: lag <= 0);
    # a replica that is not may be left out of fetches by the follower's throttle.
    in_sync: bool = False
