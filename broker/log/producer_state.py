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

Transactions (ProducerAppendInfo.appendDataBatch / appendEndTxnMarker): the table keeps each
producer's open transaction and the partition's LSO in a TxnTracker; a plain batch from a
producer with a transaction open is INVALID_TXN_STATE; a COMMIT/ABORT marker from an older
producer epoch is INVALID_PRODUCER_EPOCH, from an older coordinator epoch
TRANSACTION_COORDINATOR_FENCED; a marker with a newer producer epoch moves the producer to it
(forgetting its batches, as maybeUpdateProducerEpoch).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.log.producer_snapshot import SnapshotEntry
from broker.log.txn_index import AbortedTxn
from broker.log.txn_tracker import CompletedTxn, TxnTracker, VerificationGuard
from minibroker.core.control_records import Marker
from minibroker.core.errors import ErrorCode
from minibroker.core.records import CONTROL_FLAG, NO_PRODUCER_ID, TRANSACTIONAL_FLAG, BatchHeader

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
    coordinator_epoch: int = -1  # of the last transaction marker (-1: none yet)

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
        self.txns = TxnTracker()

    def check(
        self,
        headers: Iterable[BatchHeader],
        *,
        sequences: bool = True,
        verified: VerificationGuard | None | bool = False,
    ) -> Refusal | Duplicate | None:
        """What the leader does with a producer's batches (offsets not yet assigned): None to
        append them, a Duplicate to answer without appending, a Refusal to answer its error.
        Batches of one request are checked against each other too, in order. A coordinator's
        own batches (`sequences` False: a group coordinator's transactional offset commits,
        always at sequence 0) get the epoch check only (Kafka's AppendOrigin.Coordinator).
        `verified`: False when transaction.partition.verification.enable is off; else the
        guard the request's verification got (None: it needed none, or got none), without
        which a transactional batch may not open a transaction (txn_tracker.py)."""
        pending: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last sequence)
        for h in headers:
            pid = h.producer_id
            if pid == NO_PRODUCER_ID:
                continue
            first, last = h.base_sequence, last_sequence(h.base_sequence, h.last_offset_delta)
            known = self._producers.get(pid)
            if not sequences:
                known_epoch = pending.get(pid, (known.epoch if known else -1, 0))[0]
                if h.producer_epoch < known_epoch:
                    return Refusal(
                        ErrorCode.INVALID_PRODUCER_EPOCH,
                        f"producer {pid}: epoch {h.producer_epoch} is older than {known_epoch}",
                    )
                pending[pid] = (h.producer_epoch, last)
                continue
            if pid not in pending and known is not None:
                dup = known.duplicate_of(h.producer_epoch, first, last)
                if dup is not None:
                    return Duplicate(dup.first_offset, dup.last_offset)
            refusal = None  # an unknown producer may start at any sequence
            if pid in pending:
                epoch, last_seq = pending[pid]
                refusal = _check_one(pid, epoch, last_seq, h.producer_epoch, first)
            elif known is not None and known.batches:
                epoch, last_seq = known.epoch, known.batches[-1].last_seq
                refusal = _check_one(pid, epoch, last_seq, h.producer_epoch, first)
            elif known is not None:
                # Only markers of it are known (a fence or abort bumped its epoch): an older
                # epoch is fenced, and the epoch starts at sequence 0 (checkProducerEpoch,
                # checkSequence with NO_SEQUENCE).
                refusal = _check_one(pid, known.epoch, -1, h.producer_epoch, first)
            transactional = bool(h.attributes & TRANSACTIONAL_FLAG)
            if refusal is None and self.txns.refuses_data(pid, transactional):
                refusal = Refusal(
                    ErrorCode.INVALID_TXN_STATE,
                    f"producer {pid} has a transaction open: its batches must be transactional",
                )
            if (
                refusal is None and transactional and verified is not False and pid not in pending
                and self.txns.refuses_unverified(
                    pid, verified if isinstance(verified, VerificationGuard) else None
                )
            ):  # fmt: skip
                refusal = Refusal(
                    ErrorCode.INVALID_TXN_STATE,
                    f"producer {pid}: record was not part of an ongoing transaction (the "
                    "coordinator did not confirm this partition is in it)",
                )
            if refusal is not None:
                return refusal
            pending[pid] = (h.producer_epoch, last)
        return None

    def last_timestamp(self, producer_id: int) -> int:
        """The producer's latest batch's max timestamp here (-1: none known)."""
        entry = self._producers.get(producer_id)
        return -1 if entry is None else entry.last_timestamp

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> Refusal | None:
        """A leader's check of a COMMIT/ABORT marker from a transaction coordinator."""
        entry = self._producers.get(producer_id)
        if entry is None:
            return None
        if epoch < entry.epoch:
            return Refusal(
                ErrorCode.INVALID_PRODUCER_EPOCH,
                f"producer {producer_id}: marker epoch {epoch} is older than {entry.epoch}",
            )
        if coordinator_epoch < entry.coordinator_epoch:
            return Refusal(
                ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                f"producer {producer_id}: coordinator epoch {coordinator_epoch} is older than "
                f"{entry.coordinator_epoch} (a zombie coordinator)",
            )
        return None

    def record_marker(
        self, h: BatchHeader, marker: Marker
    ) -> tuple[CompletedTxn, AbortedTxn | None]:
        """An appended marker (its control batch's header and record): the transaction it
        ends, and for an ABORT the aborted-transaction index entry."""
        entry = self._producers.get(h.producer_id)
        if entry is None:
            entry = self._producers[h.producer_id] = ProducerEntry(h.producer_epoch)
        elif entry.epoch != h.producer_epoch:
            entry.epoch, entry.batches = h.producer_epoch, deque(maxlen=BATCHES_KEPT)
        entry.coordinator_epoch = marker.coordinator_epoch
        entry.last_timestamp = h.max_timestamp
        return self.txns.on_marker(h.producer_id, h.base_offset, marker.commit)

    def record(self, headers: Iterable[BatchHeader]) -> None:
        """Appended data batches (with their offsets): a leader's after check(), a follower's
        or recovery's as they are. Control batches are skipped: record_marker takes them,
        with the record that says COMMIT or ABORT."""
        for h in headers:
            if h.producer_id == NO_PRODUCER_ID or h.attributes & CONTROL_FLAG:
                continue
            self.txns.on_data(h.producer_id, h.base_offset, bool(h.attributes & TRANSACTIONAL_FLAG))
            entry = self._producers.get(h.producer_id)
            if entry is None or h.producer_epoch != entry.epoch:
                entry = self._producers[h.producer_id] = ProducerEntry(h.producer_epoch)
            last = last_sequence(h.base_sequence, h.last_offset_delta)
            entry.batches.append(BatchMeta(h.base_sequence, last, h.base_offset, h.last_offset))
            entry.last_timestamp = h.max_timestamp

    def snapshot(self) -> list[SnapshotEntry]:
        """Each producer's epoch and last batch, as a snapshot keeps them (Kafka keeps the
        last batch only: after a restart a retry of an older one is not recognised), its
        coordinator epoch and the first offset of its open transaction."""
        out = []
        for pid, entry in sorted(self._producers.items()):
            txn_first = self.txns.open_first_offset(pid)
            txn_first = -1 if txn_first is None else txn_first
            if entry.batches:
                b = entry.batches[-1]
                last_seq, last_offset, delta = (
                    b.last_seq,
                    b.last_offset,
                    b.last_offset - b.first_offset,
                )
            elif entry.coordinator_epoch >= 0 or txn_first >= 0:
                last_seq, last_offset, delta = -1, -1, 0  # markers only: no batch to remember
            else:
                continue
            out.append(
                SnapshotEntry(
                    pid,
                    entry.epoch,
                    last_seq,
                    last_offset,
                    delta,
                    entry.last_timestamp,
                    entry.coordinator_epoch,
                    txn_first,
                )
            )
        return out

    def load(self, entries: Iterable[SnapshotEntry]) -> None:
        """Producers from a snapshot (Kafka's loadFromSnapshot, loadProducerEntry)."""
        for e in entries:
            entry = self._producers[e.producer_id] = ProducerEntry(e.epoch)
            entry.last_timestamp, entry.coordinator_epoch = e.timestamp, e.coordinator_epoch
            if e.current_txn_first_offset >= 0:
                self.txns.on_data(e.producer_id, e.current_txn_first_offset, True)
            if e.last_sequence < 0:
                continue
            first_seq = e.last_sequence - e.offset_delta
            if first_seq < 0:  # the sequence wrapped inside the batch
                first_seq += INT32_MAX + 1
            entry.batches.append(
                BatchMeta(first_seq, e.last_sequence, e.last_offset - e.offset_delta, e.last_offset)
            )

    def truncate_to(self, log_end_offset: int) -> None:
        """Forget batches at or past the log's new end; a producer left with none is gone."""
        self.txns.truncate_to(log_end_offset)
        for pid in list(self._producers):
            entry = self._producers[pid]
            if not entry.batches:
                continue  # markers only: nothing of it is cut
            kept = [b for b in entry.batches if b.last_offset < log_end_offset]
            if not kept:
                del self._producers[pid]
            elif len(kept) < len(entry.batches):
                entry.batches = deque(kept, maxlen=BATCHES_KEPT)

    def clear(self) -> None:
        self._producers.clear()
        self.txns.clear()


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
