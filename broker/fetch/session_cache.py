"""Incremental fetch sessions on the leader (KIP-227, Kafka's FetchSession.scala; the follower's
side is reference §3.8), as rules without I/O.

A follower of thousands of partitions would otherwise send every partition's fetch state in
every Fetch and get an answer for each, nearly all of them empty. With a session, the leader
keeps each partition's fetch state; a follower's next request names only the partitions whose
state changed (and those it no longer wants), and the answer holds only partitions with news:
records, a new HW or log start offset, or an error. Pull semantics do not change: the fetch
offset the leader keeps for a partition is the follower's last one, and every fetch of the
session counts for every partition in it (its LEO and last-caught-up time), as in Kafka.

Session ids and epochs as Kafka's FetchMetadata: id 0 and epoch 0 open a session, id 0 and
epoch -1 (or no epoch) fetch without one, id N and epoch E > 0 continue session N, id N and
epoch -1 close it.
"""

from __future__ import annotations

import random
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from broker.purgatory import DelayedOperation
from broker.replication.replica import RemoteReplica
from broker.types import FetchPartitionRequest, FetchPartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
INVALID_SESSION_ID = 0
INT32_MAX = 2**31 - 1


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`; it wraps to 1, never to INITIAL_EPOCH or FINAL_EPOCH."""
    return 1 if epoch >= INT32_MAX or epoch < 1 else epoch + 1


@dataclass
class CachedPartition:
    """A partition's fetch state in a session, and what its last answer told the follower."""

    request: FetchPartitionRequest
    sent_high_watermark: int = -1
    sent_log_start_offset: int = -1
    # Set while the partition is idle for this follower (idle_followers.py): its replica
    # state on the leader and the LEO it is idle at. Cleared when it is named or read.
    idle_replica: RemoteReplica | None = None
    idle_leo: int = -1


@dataclass
class FetchSession:
    session_id: int
    replica_id: int
    epoch: int  # the epoch the next request must carry
    partitions: dict[TopicPartition, CachedPartition]
    last_used_ms: int
    # Partitions that changed (LEO, HW, leadership, ISR) since the last fetch of the session.
    changed: set[TopicPartition] = field(default_factory=set)
    # The session's fetch waiting for any of its partitions to change: the session watches
    # them for it, so a fetch does not watch thousands of partitions one by one in the
    # purgatory (and stop watching them) every replica.fetch.wait.max.ms.
    waiting: set[DelayedOperation[Any]] = field(default_factory=set)


@dataclass(frozen=True)
class FetchContext:
    """What one Fetch reads (`requests`: every partition of the session) and how its answer is
    cut down (`incremental`: only partitions with news)."""

    requests: tuple[FetchPartitionRequest, ...]
    session_id: int
    incremental: bool
    session: FetchSession | None = None

    def response_partitions(
        self, results: Mapping[TopicPartition, FetchPartitionResult]
    ) -> list[tuple[TopicPartition, FetchPartitionResult]]:
        """The partitions the answer carries, of those read (`results`, in their order);
        remembers what it sent."""
        out = []
        cached = self.session.partitions if self.session is not None else {}
        for tp, r in results.items():
            c = cached.get(tp)
            if c is None:
                out.append((tp, r))
                continue
            news = (
                bool(r.records)
                or r.error is not ErrorCode.NONE
                or r.high_watermark != c.sent_high_watermark
                or r.log_start_offset != c.sent_log_start_offset
            )
            if news or not self.incremental:
                c.sent_high_watermark = r.high_watermark
                c.sent_log_start_offset = r.log_start_offset
                out.append((tp, r))
        return out


class FetchSessionCache:
    """The leader's sessions, at most `capacity`; the least recently used goes first."""

    def __init__(self, capacity: int = 1000, seed: int | None = None) -> None:
        self.capacity = capacity
        self._sessions: OrderedDict[int, FetchSession] = OrderedDict()
        self._ids = random.Random(seed)

    def __len__(self) -> int:
        return len(self._sessions)

    def mark_changed(self, tp: TopicPartition) -> None:
        """`tp` changed on this leader: the sessions holding it look at it again, and their
        waiting fetches re-test their condition for it."""
        for session in self._sessions.values():
            if tp in session.partitions:
                session.changed.add(tp)
                for op in list(session.waiting):
                    op.maybe_complete(tp)

    def partitions_cached(self) -> int:
        return sum(len(s.partitions) for s in self._sessions.values())

    def context(
        self,
        *,
        session_id: int,
        epoch: int,
        replica_id: int,
        partitions: Iterable[FetchPartitionRequest],
        forgotten: Iterable[TopicPartition],
        now_ms: int,
    ) -> FetchContext | ErrorCode:
        """The context of one Fetch, or the top-level error to answer it with (the follower
        then starts a new session with a full request)."""
        parts = tuple(partitions)
        if session_id == INVALID_SESSION_ID:
            if epoch != INITIAL_EPOCH or self.capacity <= 0:
                return FetchContext(parts, INVALID_SESSION_ID, incremental=False)
            return self._open(replica_id, parts, now_ms)
        if epoch == FINAL_EPOCH:
            self._sessions.pop(session_id, None)
            return FetchContext(parts, INVALID_SESSION_ID, incremental=False)
        session = self._sessions.get(session_id)
        if session is None or session.replica_id != replica_id:
            return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
        if epoch != session.epoch:
            return ErrorCode.INVALID_FETCH_SESSION_EPOCH
        for tp in forgotten:
            session.partitions.pop(tp, None)
        for req in parts:
            c = session.partitions.get(req.tp)
            if c is None:
                session.partitions[req.tp] = CachedPartition(req)
            else:
                c.request = req
                c.idle_replica = None
        session.epoch = next_epoch(epoch)
        session.last_used_ms = now_ms
        self._sessions.move_to_end(session_id)
        requests = tuple(c.request for c in session.partitions.values())
        return FetchContext(requests, session_id, incremental=True, session=session)

    def _open(
        self, replica_id: int, parts: tuple[FetchPartitionRequest, ...], now_ms: int
    ) -> FetchContext:
        if replica_id >= 0:
            # A follower broker fetches from this leader through one fetcher: its new session
            # replaces any it had (its fetcher was recreated, or it restarted).
            for old in [k for k, v in self._sessions.items() if v.replica_id == replica_id]:
                del self._sessions[old]
        while len(self._sessions) >= self.capacity:
            self._sessions.popitem(last=False)
        session_id = self._new_id()
        session = FetchSession(
            session_id,
            replica_id,
            next_epoch(INITIAL_EPOCH),
            {req.tp: CachedPartition(req) for req in parts},
            now_ms,
        )
        self._sessions[session_id] = session
        return FetchContext(parts, session_id, incremental=False, session=session)

    def _new_id(self) -> int:
        while True:
            candidate = self._ids.randint(1, INT32_MAX)
            if candidate not in self._sessions:
                return candidate


def request_lookup(
    read: Mapping[TopicPartition, FetchPartitionRequest], session: FetchSession | None
) -> Callable[[TopicPartition], FetchPartitionRequest]:
    """The request of a partition a waiting fetch watches: one it read, else (an idle
    partition it did not read) the session's."""

    def request_of(tp: TopicPartition) -> FetchPartitionRequest:
        request = read.get(tp)
        if request is None:
            assert session is not None, "a fetch watches only what it read, or its session"
            request = session.partitions[tp].request
        return request

    return request_of


@contextmanager
def waiting_in(session: FetchSession | None, op: DelayedOperation[Any]) -> Iterator[None]:
    """While a follower's fetch waits, its session re-tests it when any of the session's
    partitions changes (FetchSessionCache.mark_changed)."""
    if session is None:
        yield
        return
    session.waiting.add(op)
    try:
        yield
    finally:
        session.waiting.discard(op)
