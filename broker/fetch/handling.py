"""A Fetch request's handling, whatever carried it (gRPC or Kafka's wire protocol): its
incremental fetch session (KIP-227), the reads, the wait, and the partitions its answer holds.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

from broker.fetch.idle_followers import partitions_to_read
from broker.replica_manager import ReplicaManager
from broker.types import FetchParams, FetchPartitionRequest, FetchPartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

# Kafka's replica.fetch.wait.max.ms is at most the socket timeout; a client may not park a
# fetch longer than this on our loop.
MAX_WAIT_MS = 30_000


@dataclass(frozen=True)
class FetchCall:
    """A Fetch request's fields, as every protocol version that has them says them."""

    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int  # 0 or less: no limit of the request's own
    session_id: int
    session_epoch: int
    partitions: Sequence[FetchPartitionRequest]
    forgotten: Sequence[TopicPartition] = ()
    isolation_level: int = 0


@dataclass(frozen=True)
class FetchAnswer:
    session_id: int
    partitions: list[tuple[TopicPartition, FetchPartitionResult]]


async def handle_fetch(
    rm: ReplicaManager, call: FetchCall, fetch_max_bytes: int
) -> FetchAnswer | ErrorCode:
    """The partitions the answer carries, or the session's error (the whole request fails)."""
    context = rm.fetch_sessions.context(
        session_id=call.session_id,
        epoch=call.session_epoch,
        replica_id=call.replica_id,
        partitions=call.partitions,
        forgotten=call.forgotten,
        now_ms=rm.now_ms(),
    )
    if isinstance(context, ErrorCode):
        return context
    params = FetchParams(
        replica_id=call.replica_id,
        max_wait_ms=max(0, min(call.max_wait_ms, MAX_WAIT_MS)),
        min_bytes=max(0, call.min_bytes),
        # Kafka caps every fetch at the broker's fetch.max.bytes, whatever it asks for.
        max_bytes=min(call.max_bytes if call.max_bytes > 0 else 1 << 30, fetch_max_bytes),
        partitions=context.requests,
        isolation_level=call.isolation_level,
    )
    session = None
    if context.incremental and context.session is not None and params.is_follower:
        # Idle partitions of the session count as fetched without a read; the session
        # watches them while the fetch waits.
        session = context.session
        named = {r.tp for r in call.partitions}
        reads = partitions_to_read(session, named, rm.partitions, call.replica_id, rm.now_ms())
        params = dataclasses.replace(params, partitions=reads)
    results = await rm.fetch_messages(params, session)
    return FetchAnswer(context.session_id, context.response_partitions(results))
