"""What a clean does with transactions, as Kafka 2.6's cleaner (LogCleaner.scala:
CleanedTransactionMetadata, shouldDiscardBatch, cleanInto's isBatchLastRecordOfProducer). Pure:
batch headers in, decisions out.

- A data batch of an aborted transaction loses its records (and the offset map skips it).
- A COMMIT marker may go once no batch of its transaction was read in the same pass (their
  records were compacted away before); an ABORT marker may go once no batch of its
  transaction was read (the aborted records were removed by an earlier pass). Either only in a
  segment past the delete horizon (`delete.retention.ms`, as tombstones). An ABORT marker that
  stays because its transaction's batches were read keeps its entry in the cleaned segment's
  aborted-transaction index; one kept only for the horizon does not (its records are gone).
- A producer's last batch stays, at least as a bare header, so its sequence and epoch survive:
  its last data batch of the current epoch, or, when its epoch was bumped since (a marker
  written by the coordinator's fence or timeout), its markers of that epoch."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.log.txn_index import AbortedTxn
from minibroker.core.control_records import Marker
from minibroker.core.records import (
    CONTROL_FLAG,
    NO_PRODUCER_ID,
    TRANSACTIONAL_FLAG,
    BatchHeader,
)


@dataclass
class _OngoingAbort:
    txn: AbortedTxn
    read_a_batch: bool = False


class CleanedTransactions:
    """The transactions a pass over the log is inside of, batch after batch in offset order
    (one instance per pass: the offset map's, and the clean's across its segment groups)."""

    def __init__(self, aborted: Iterable[AbortedTxn]) -> None:
        # Known aborted transactions, the lowest first offset last (popped as the pass reaches it).
        self._pending = sorted(aborted, key=lambda a: a.first_offset, reverse=True)
        self._aborting: dict[int, _OngoingAbort] = {}
        self._committing: set[int] = set()
        self.kept_aborts: list[AbortedTxn] = []  # for the cleaned segment's .txnindex

    def _reach(self, offset: int) -> None:
        while self._pending and self._pending[-1].first_offset <= offset:
            txn = self._pending.pop()
            self._aborting.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_data_batch(self, h: BatchHeader) -> bool:
        """Whether the data batch belongs to an aborted transaction (onBatchRead)."""
        self._reach(h.last_offset)
        if not h.attributes & TRANSACTIONAL_FLAG:
            return False
        ongoing = self._aborting.get(h.producer_id)
        if ongoing is None:
            self._committing.add(h.producer_id)
            return False
        ongoing.read_a_batch = True
        return True

    def on_marker(self, h: BatchHeader, marker: Marker | None) -> bool:
        """Whether the control batch may go, the delete horizon aside (onControlBatchRead).
        `marker` is None for a control batch that holds no COMMIT/ABORT."""
        self._reach(h.last_offset)
        if h.record_count == 0:
            return True  # a marker an earlier pass emptied
        if marker is None:
            return False  # a control record of another type stays
        if marker.commit:
            if h.producer_id in self._committing:
                self._committing.discard(h.producer_id)
                return False
            return True
        ongoing = self._aborting.pop(h.producer_id, None)
        if ongoing is not None and ongoing.read_a_batch:
            self.kept_aborts.append(ongoing.txn)
            return False
        return True


@dataclass(frozen=True)
class LastOfProducer:
    """A producer's last data batch of its current epoch (None after a bump with no data)."""

    last_data_offset: int | None
    epoch: int


def track_last_of_producers(
    last: dict[int, LastOfProducer], headers: Iterable[BatchHeader]
) -> None:
    """Fold batch headers, in offset order, into each producer's last entry."""
    for h in headers:
        pid = h.producer_id
        if pid == NO_PRODUCER_ID:
            continue
        before = last.get(pid)
        if not h.attributes & CONTROL_FLAG:
            last[pid] = LastOfProducer(h.last_offset, h.producer_epoch)
        elif before is None or before.epoch != h.producer_epoch:
            last[pid] = LastOfProducer(None, h.producer_epoch)


def is_last_of_producer(last: dict[int, LastOfProducer], h: BatchHeader) -> bool:
    """Kafka's isBatchLastRecordOfProducer: the batch keeps the producer's sequence or epoch.
    Kafka asks only of producers still active (not past producer.id.expiration.ms); here every
    producer in the log counts, so an expired producer's last batch stays as a bare header."""
    entry = last.get(h.producer_id) if h.producer_id != NO_PRODUCER_ID else None
    if entry is None:
        return False
    if entry.last_data_offset is not None:
        return h.last_offset == entry.last_data_offset
    return bool(h.attributes & CONTROL_FLAG) and h.producer_epoch == entry.epoch
