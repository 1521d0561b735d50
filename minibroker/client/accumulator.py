"""The producer's record accumulator (Kafka's RecordAccumulator rules), pure: a batch is sent
when full, after linger_ms, on flush or close, and after a failure once retry_backoff_ms has
passed; its v2 bytes are built once and resent unchanged on retries.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Generic, TypeVar

from minibroker.core.errors import REFRESH_METADATA, RETRIABLE, ErrorCode
from minibroker.core.records import HEADER_SIZE, RecordFields, build_batch
from minibroker.core.types import TopicPartition

H = TypeVar("H")

# Kafka's DefaultRecord.MAX_RECORD_OVERHEAD: length, attributes, timestamp and offset deltas,
# key and value lengths and the header count, each at its widest varint.
MAX_RECORD_OVERHEAD = 21
_MAX_HEADER_OVERHEAD = 10

# Codes where resending the same bytes cannot succeed, whatever RETRIABLE says.
PRODUCE_FATAL: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.CORRUPT_MESSAGE,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.RECORD_LIST_TOO_LARGE,
        ErrorCode.INVALID_REQUIRED_ACKS,
        ErrorCode.INVALID_RECORD,
    }
)


class Outcome(Enum):
    DONE = "done"
    RETRY = "retry"
    REFRESH_AND_RETRY = "refresh_and_retry"
    FAIL = "fail"


def produce_outcome(code: ErrorCode) -> Outcome:
    """What a partition's Produce error code means for its batch."""
    if code is ErrorCode.NONE:
        return Outcome.DONE
    if code in PRODUCE_FATAL:
        return Outcome.FAIL
    if code in REFRESH_METADATA:
        return Outcome.REFRESH_AND_RETRY
    if code in RETRIABLE:
        return Outcome.RETRY
    return Outcome.FAIL


def record_size_upper_bound(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]] = ()
) -> int:
    """Bytes a record can take in a batch, at most (Kafka estimates the same way)."""
    size = MAX_RECORD_OVERHEAD + len(key or b"") + len(value or b"")
    for hkey, hvalue in headers:
        size += _MAX_HEADER_OVERHEAD + len(hkey.encode("utf-8")) + len(hvalue or b"")
    return size


@dataclass(eq=False)
class ProducerBatch(Generic[H]):
    """Records bound for one partition and the outcome they share (in the shell, what settles
    every record's future at once); record i of the batch gets the batch's offset + i."""

    tp: TopicPartition
    created_ms: int
    outcome: H
    records: list[RecordFields] = field(default_factory=list)
    estimated_bytes: int = HEADER_SIZE
    full: bool = False
    attempts: int = 0
    retry_after_ms: int = 0
    payload: bytes | None = None
    completed: bool = False

    def build(self) -> bytes:
        """The batch's v2 bytes, built on first send and then kept for retries."""
        if self.payload is None:
            base_ts = self.records[0][3] or 0
            self.payload = build_batch(self.records, base_timestamp=base_ts)
        return self.payload

    def expired(self, now_ms: int, delivery_timeout_ms: int) -> bool:
        return now_ms - self.created_ms >= delivery_timeout_ms


@dataclass(frozen=True)
class ReadyCheck:
    """Partitions with a sendable head batch, and when to look again (None = nothing waits)."""

    ready: list[TopicPartition]
    next_check_ms: int | None


class RecordAccumulator(Generic[H]):
    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: int,
        retry_backoff_ms: int,
        new_outcome: Callable[[TopicPartition], H],
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._new_outcome = new_outcome
        self.buffered_bytes = 0
        self._queues: dict[TopicPartition, deque[ProducerBatch[H]]] = {}
        self._flushes = 0
        self._closing = False

    def starts_new_batch(self, tp: TopicPartition, size: int) -> bool:
        """Whether a record of `size` bytes for `tp` would open a new batch (the sticky
        partitioner moves on when it would)."""
        q = self._queues.get(tp)
        return not q or not self._fits(q[-1], size)

    def append(
        self, tp: TopicPartition, record: RecordFields, size: int, now_ms: int
    ) -> ProducerBatch[H]:
        """Add a record to `tp`'s open batch, or open a new one (a record larger than
        batch_size gets a batch of its own, as in Kafka), and return that batch: the record
        is its last. The sender has something new to decide when it was opened or filled up
        (`has_news`)."""
        q = self._queues.get(tp)
        if q is None:
            q = self._queues[tp] = deque()
        batch = q[-1] if q else None
        if batch is None or not self._fits(batch, size):
            if batch is not None:
                batch.full = True
            batch = ProducerBatch(tp, now_ms, self._new_outcome(tp))
            q.append(batch)
        batch.records.append(record)
        batch.estimated_bytes += size
        batch.full = batch.estimated_bytes >= self.batch_size
        self.buffered_bytes += size
        return batch

    @staticmethod
    def has_news(batch: ProducerBatch[H]) -> bool:
        """Whether the append that returned `batch` opened it or filled it up."""
        return batch.full or len(batch.records) == 1

    def _fits(self, batch: ProducerBatch[H], size: int) -> bool:
        return (
            not batch.full
            and batch.payload is None
            and batch.estimated_bytes + size <= self.batch_size
        )

    def ready(self, now_ms: int, in_flight: Collection[TopicPartition]) -> ReadyCheck:
        """Which partitions can send their head batch now. Partitions in `in_flight` wait, so
        that each partition has one batch in flight and keeps its order across retries."""
        ready: list[TopicPartition] = []
        next_check: int | None = None
        hurry = self._flushes > 0 or self._closing
        for tp, q in self._queues.items():
            if not q or tp in in_flight:
                continue
            head = q[0]
            if head.attempts > 0 and now_ms < head.retry_after_ms:
                wait = head.retry_after_ms - now_ms
            elif hurry or head.full or len(q) > 1 or head.attempts > 0:
                wait = 0
            else:
                wait = max(0, head.created_ms + self.linger_ms - now_ms)
            if wait == 0:
                ready.append(tp)
            else:
                next_check = wait if next_check is None else min(next_check, wait)
        return ReadyCheck(ready, next_check)

    def drain(self, tps: Iterable[TopicPartition], max_request_size: int) -> list[ProducerBatch[H]]:
        """Take the head batch of each partition for one request to one broker, up to
        max_request_size bytes (always at least one batch)."""
        out: list[ProducerBatch[H]] = []
        size = 0
        for tp in tps:
            q = self._queues.get(tp)
            if not q:
                continue
            batch = q[0]
            batch_bytes = len(batch.build())
            if out and size + batch_bytes > max_request_size:
                break
            q.popleft()
            out.append(batch)
            size += batch_bytes
        return out

    def reenqueue(self, batch: ProducerBatch[H], now_ms: int) -> None:
        """Put a batch that failed retriably back at the head of its partition's queue."""
        batch.retry_after_ms = now_ms + self.retry_backoff_ms
        self._queues.setdefault(batch.tp, deque()).appendleft(batch)

    def expire(self, now_ms: int, delivery_timeout_ms: int) -> list[ProducerBatch[H]]:
        """Remove and return queued batches older than delivery_timeout_ms."""
        out: list[ProducerBatch[H]] = []
        for q in self._queues.values():
            while q and q[0].expired(now_ms, delivery_timeout_ms):
                out.append(q.popleft())
        return out

    def release(self, batch: ProducerBatch[H]) -> None:
        """A batch is done (acknowledged or failed): its bytes no longer count as buffered."""
        assert not batch.completed, "a batch completes once"
        batch.completed = True
        self.buffered_bytes -= batch.estimated_bytes - HEADER_SIZE

    def abort_all(self) -> list[ProducerBatch[H]]:
        """Remove and return every queued batch (closing without waiting)."""
        out = [b for q in self._queues.values() for b in q]
        self._queues.clear()
        return out

    def begin_flush(self) -> None:
        self._flushes += 1

    def end_flush(self) -> None:
        self._flushes -= 1

    def begin_close(self) -> None:
        self._closing = True

    def has_queued(self) -> bool:
        return any(self._queues.values())

    def queued(self) -> list[ProducerBatch[H]]:
        return [b for q in self._queues.values() for b in q]
