"""Idempotent producers' state of one partition: per producer id its epoch and its last five
batches' sequence ranges and offsets, as Kafka 2.6's ProducerStateManager keeps them, and the
rules a leader applies to a producer's batch before appending it. Pure: no I/O, no clock.

Rules (Kafka 2.6 `Log.analyzeAndValidateProducerState`, `ProducerAppendInfo.checkSequence`):
- a batch without a producer id (-1) is not checked;
- a batch of a known producer, with its current epoch, whose sequence range is one of the five
  last appended is a duplicate: it is not appended again, and the answer is the first append's
  offsets, with no error (the producer's retry of a batch whose answer was lost);
- an epoch below the producer's current one: INVALID_PRODUCER_EPOCH (a fenced producer);
- a new epoch must start at sequence 0, the same epoch must go on at last sequence + 1
  (wrapping at 2^31-1 to 0): else OUT_OF_ORDER_SEQUENCE_NUMBER;
- a producer the partition knows nothing of may start at any sequence (Kafka 2.6 accepts it:
  its batches may have been removed by retention).
Followers and log recovery record every batch without checks. Truncating the log forgets the
batches past its new end (Kafka restores an older snapshot instead; without snapshots, a
producer whose every remembered batch was truncated is forgotten and starts over unchecked).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.log.producer_snapshot import SnapshotEntry
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NO_PRODUCER_ID, BatchHeader

INT32_MAX = 2**31 - 1
BATCHES_KEPT = 5  # Kafka's ProducerStateEntry.NumBatchesToRetain


def last_sequence(base_sequence: int, last_offset_delta: int) -> int:
    """A batch's last sequence number: Kafka's DefaultRecordBatch.incrementSequence, which
    wraps past 2^31-1 to 0."""
    if base_sequence > INT32_MAX - last_offset_delta:
        return last_offset_delta - (INT32_MAX - base_sequence) - 1
    return base_sequence + last_offset_delta


def in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == INT32_MAX)


@dataclass(frozen=True)
class BatchMeta:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int


@dataclass
class ProducerEntry:
    epoch: int
    batches: deque[BatchMeta] = field(default_factory=lambda: deque(maxlen=BATCHES_KEPT))
    last_timestamp: int = -1  # the last batch's max timestamp (snapshots keep it)

    def duplicate_of(self, epoch: int, first_seq: int, last_seq: int) -> BatchMeta | None:
        if epoch != self.epoch:
            return None
        return next(
            (b for b in self.batches if (b.first_seq, b.last_seq) == (first_seq, last_seq)),
            None,
        )


@dataclass(frozen=True)
class Refusal:
    code: ErrorCode
    message: str


@dataclass(frozen=True)
class Duplicate:
    """The batch was appended before: answer with these offsets, append nothing."""

    first_offset: int
    last_offset: int


class ProducerStateTable:
    """The idempotent producers a partition has seen, by producer id."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerEntry] = {}

    def check(self, headers: Iterable[BatchHeader]) -> Refusal | Duplicate | None:
        """What the leader does with a producer's batches (offsets not yet assigned): None to
        append them, a Duplicate to answer without appending, a Refusal to answer its error.
        Batches of one request are checked against each other too, in order."""
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence)
        for h in headers:
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            first, last = h.base_sequence, last_sequence(h.base_sequence, h.last_offset_delta)
            known = self._producers.get(pid)
            if pid not in pending and known is not None:
                dup = known.duplicate_of(h.producer_epoch, first, last)
                if dup is not None:
                    return Duplicate(dup.first_offset, dup.last_offset)
            if pid in pending:
                epoch, last_seq = pending[pid]
            elif known is not None and known.batches:
                epoch, last_seq = known.epoch, known.batches[-1].last_seq
            else:
                pending[pid] = (h.producer_epoch, last)
                continue  # unknown producer: any sequence
            refusal = _check_one(pid, epoch, last_seq, h.producer_epoch, first)
            if refusal is not None:
                return refusal
            pending[pid] = (h.producer_epoch, last)
        return None

    def record(self, headers: Iterable[BatchHeader]) -> None:
        """Appended batches (with their offsets): a leader's after check(), a follower's or
        recovery's as they are."""
        for h in headers:
            if h.producer_id == NO_PRODUCER_ID:
                continue
            entry = self._producers.get(h.producer_id)
            if entry is None or h.producer_epoch != entry.epoch:
                entry = self._producers[h.producer_id] = ProducerEntry(h.producer_epoch)
            last = last_sequence(h.base_sequence, h.last_offset_delta)
            entry.batches.append(BatchMeta(h.base_sequence, last, h.base_offset, h.last_offset))
            entry.last_timestamp = h.max_timestamp

    def snapshot(self) -> list[SnapshotEntry]:
        """Each producer's epoch and last batch, as a snapshot keeps them (Kafka keeps the
        last batch only: after a restart a retry of an older one is not recognised)."""
        out = []
        for pid, entry in sorted(self._producers.items()):
            if entry.batches:
                b = entry.batches[-1]
                delta = b.last_offset - b.first_offset
                out.append(
                    SnapshotEntry(
                        pid, entry.epoch, b.last_seq, b.last_offset, delta, entry.last_timestamp
                    )
                )
        return out

    def load(self, entries: Iterable[SnapshotEntry]) -> None:
        """Producers from a snapshot (Kafka's loadFromSnapshot)."""
        for e in entries:
            first_seq = e.last_sequence - e.offset_delta
            if first_seq < 0:  # the sequence wrapped inside the batch
                first_seq += INT32_MAX + 1
            entry = self._producers[e.producer_id] = ProducerEntry(e.epoch)
            entry.batches.append(
                BatchMeta(first_seq, e.last_sequence, e.last_offset - e.offset_delta, e.last_offset)
            )
            entry.last_timestamp = e.timestamp

    def truncate_to(self, log_end_offset: int) -> None:
        """Forget batches at or past the log's new end; a producer left with none is gone."""
        for pid in list(self._producers):
            entry = self._producers[pid]
            kept = [b for b in entry.batches if b.last_offset < log_end_offset]
            if not kept:
                del self._producers[pid]
            elif len(kept) < len(entry.batches):
                entry.batches = deque(kept, maxlen=BATCHES_KEPT)

    def clear(self) -> None:
        self._producers.clear()


def _check_one(
    pid: int, epoch: int, last_seq: int, batch_epoch: int, first_seq: int
) -> Refusal | None:
    if batch_epoch < epoch:
        return Refusal(
            ErrorCode.INVALID_PRODUCER_EPOCH,
            f"producer {pid}: epoch {batch_epoch} is older than its current epoch {epoch}",
        )
    if batch_epoch > epoch:
        if first_seq != 0:
            return Refusal(
                ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                f"producer {pid}: new epoch {batch_epoch} must start at sequence 0, "
                f"not {first_seq}",
            )
        return None
    if not in_sequence(last_seq, first_seq):
        return Refusal(
            ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
            f"producer {pid}, epoch {epoch}: sequence {first_seq} does not follow {last_seq}",
        )
    return None
