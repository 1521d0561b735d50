"""A log's transactions (a part of Log, its base class, kept apart so each file has one job):
COMMIT/ABORT markers appended by the leader for a transaction coordinator and by every replica
as they come, each segment's aborted-transaction index (`<base>.txnindex`, txn_index.py), the
last stable offset, and the aborted transactions a read_committed fetch carries.

As Kafka 2.6's Log (appendAsLeader with origin Coordinator, updateFirstUnstableOffset,
collectAbortedTransactions) and ProducerStateManager (loadProducerState replays markers too).

- The producer table (producer_state.py) is needed to know which transactions are open: it is
  built before the first transactional batch or marker is appended, or when the LSO is asked
  for. A log that never sees a transaction never builds it for them.
- An ABORT's index entry is appended to the segment that holds the marker, on every replica.
  Opening the log drops entries past a segment's end (a torn tail), and replaying the tail
  after the last producer snapshot puts back an entry a crash lost between the marker and its
  entry (Kafka rebuilds the index when it recovers a segment).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from broker.log.log_types import AppendInfo
from broker.log.producer_state import ProducerStateTable
from broker.log.producer_state_manager import ProducerStateManager
from broker.log.segment import TXN_INDEX_SUFFIX, Segment, base_offset_of, txn_index_file_name
from broker.log.segment_reads import headers as segment_headers
from broker.log.store import SegmentStore
from broker.log.txn_index import (
    ENTRY_BYTES,
    AbortedTxn,
    TxnIndexError,
    collect,
    decode,
    truncated,
)
from broker.log.txn_tracker import VerificationGuard
from minibroker.core import batch_validation
from minibroker.core.control_records import Marker, marker_of
from minibroker.core.records import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    RecordError,
    build_batch,
    iter_batches,
)

TXN_FLAGS = CONTROL_FLAG | TRANSACTIONAL_FLAG


def marker_batch(producer_id: int, producer_epoch: int, marker: Marker, timestamp_ms: int) -> bytes:
    """The control batch a coordinator's marker is written as (offset and epoch stamped later)."""
    return build_batch(
        [(marker.key(), marker.value(), (), None)],
        base_timestamp=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        attributes=TXN_FLAGS,
    )


class LogTransactions:
    _segments: list[Segment]
    _store: SegmentStore
    _producers: ProducerStateManager
    _aborted: dict[int, list[AbortedTxn]]
    _clock: Callable[[], int]

    if TYPE_CHECKING:

        @property
        def log_start_offset(self) -> int: ...

        @property
        def log_end_offset(self) -> int: ...

        def _append(self, data: bytes, headers: Sequence[BatchHeader]) -> AppendInfo: ...

    def _load_txn_indexes(self, repairs: list[str]) -> None:
        """Each segment's entries, those past its end dropped (files of gone segments too)."""
        self._aborted = {}
        bases = {s.base_offset for s in self._segments}
        names = set(self._store.list())
        for segment in self._segments:
            name = txn_index_file_name(segment.base_offset)
            if name not in names:
                continue
            data = self._store.read(name, 0, self._store.size(name))
            try:
                entries = decode(data)
            except TxnIndexError as exc:
                entries = []
                repairs.append(f"{name}: discarded ({exc})")
            kept = truncated(entries, segment.next_offset)
            if len(data) != len(kept) * ENTRY_BYTES:
                repairs.append(
                    f"{name}: cut to {len(kept)} entries (a torn entry, or markers past the "
                    f"segment's end at {segment.next_offset})"
                )
                if kept:
                    self._store.write_atomic(name, b"".join(e.encode() for e in kept))
            if kept:
                self._aborted[segment.base_offset] = kept
            else:
                self._store.delete(name)
        for name in names:
            base = base_offset_of(name, TXN_INDEX_SUFFIX)
            if base is not None and base not in bases:
                self._store.delete(name)  # left over from a deletion cut short

    # ---- the producer table with its transactions ----

    def write_producer_snapshot(self) -> None:
        """A durable snapshot at the log end (a clean stop: the next start reads no batch)."""
        self._producers.take_snapshot(self.log_end_offset, durable=True)

    def _txn_table(self) -> ProducerStateTable:
        """The table, built on first need by replaying the tail with its markers; an abort
        the tail shows but the index lacks is put back."""
        aborts: list[AbortedTxn] = []
        table = self._producers.get(self._replay_from, aborts)
        for entry in aborts:
            self._heal(entry)
        return table

    def _replay_from(self, offset: int) -> Iterator[tuple[BatchHeader, Marker | None]]:
        for segment in self._segments:
            if segment.next_offset <= offset:
                continue
            for h in segment_headers(self._store, segment):
                if h.base_offset < offset:
                    continue
                marker = None
                if h.attributes & CONTROL_FLAG:
                    buf = self._store.read(segment.log_name, h.position, h.size)
                    marker = marker_of(buf, dataclasses.replace(h, position=0))
                yield h, marker

    def _heal(self, entry: AbortedTxn) -> None:
        segment = self._segments[self._segment_holding(entry.last_offset)]
        entries = self._aborted.get(segment.base_offset, [])
        if any(e.last_offset == entry.last_offset for e in entries):
            return
        self._append_entry(segment.base_offset, entry)

    def _segment_holding(self, offset: int) -> int:
        """The segment whose offsets `offset` falls in (the first one below them all)."""
        return max(0, bisect.bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1)

    def _append_entry(self, base: int, entry: AbortedTxn) -> None:
        self._aborted.setdefault(base, []).append(entry)
        self._store.append(txn_index_file_name(base), entry.encode())

    # ---- appends ----

    def append_marker(
        self,
        producer_id: int,
        producer_epoch: int,
        marker: Marker,
        leader_epoch: int,
    ) -> AppendInfo:
        """The leader appends a transaction coordinator's COMMIT/ABORT for a producer (Kafka's
        appendAsLeader with origin Coordinator), after the producer-state check: an older
        producer epoch is INVALID_PRODUCER_EPOCH, an older coordinator epoch
        TRANSACTION_COORDINATOR_FENCED (RecordError; the log is unchanged)."""
        refusal = self._txn_table().check_marker(
            producer_id, producer_epoch, marker.coordinator_epoch
        )
        if refusal is not None:
            raise RecordError(refusal.code, refusal.message)
        data = marker_batch(producer_id, producer_epoch, marker, self._clock())
        stamped = batch_validation.stamp(
            data, list(iter_batches(data)), next_offset=self.log_end_offset, epoch=leader_epoch
        )
        return self._append(stamped.data, stamped.batches)

    # Log._append calls these around its write.

    def _before_append(self, headers: Sequence[BatchHeader]) -> None:
        if self._producers.table is None and any(h.attributes & TXN_FLAGS for h in headers):
            self._txn_table()

    def _record_appended(self, data: bytes, headers: Sequence[BatchHeader]) -> None:
        """The producers' and transactions' state after `headers` (positions in `data`) were
        appended to the active segment."""
        table = self._producers.table
        if table is None:
            return
        if not any(h.attributes & CONTROL_FLAG for h in headers):
            table.record(headers)
            return
        for h in headers:
            if not h.attributes & CONTROL_FLAG:
                table.record([h])
                continue
            marker = marker_of(data, h)
            if marker is None:
                continue
            _, aborted = table.record_marker(h, marker)
            if aborted is not None:
                self._append_entry(self._segments[-1].base_offset, aborted)

    # ---- reads ----

    def last_stable_offset(self, high_watermark: int) -> int:
        """Kafka's Log.lastStableOffset: the first offset of the earliest transaction that is
        open or whose marker the HW has not passed, if below the HW; else the HW."""
        txns = self._txn_table().txns
        txns.on_high_watermark(high_watermark)
        return txns.last_stable_offset(high_watermark, self.log_start_offset)

    def reported_last_stable_offset(self, high_watermark: int) -> int:
        """The LSO a read_uncommitted fetch reports (clients only show it): the LSO when the
        producer table is built, else the HW, so that such fetches never replay a log's
        headers on the loop."""
        if self._producers.table is None:
            return high_watermark
        return self.last_stable_offset(high_watermark)

    def start_txn_verification(self, producer_id: int) -> VerificationGuard | None:
        """The producer's verification guard, or None with a transaction open here
        (transaction.partition.verification.enable; txn_tracker.py)."""
        return self._txn_table().txns.start_verification(producer_id)

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction (for describing)."""
        return self._txn_table().txns.open_transactions()

    def producer_last_timestamp(self, producer_id: int) -> int:
        """The producer's latest batch's max timestamp here (-1: none known)."""
        return self._txn_table().last_timestamp(producer_id)

    def all_aborted(self) -> list[AbortedTxn]:
        """Every aborted transaction in the log's indexes (the log cleaner removes them)."""
        return [e for s in self._segments for e in self._aborted.get(s.base_offset, [])]

    def aborted_transactions(self, fetch_offset: int, data: bytes) -> list[AbortedTxn]:
        """What a read_committed fetch of `data` (read from `fetch_offset`) must carry: every
        aborted transaction overlapping the offsets it covers (collectAbortedTransactions)."""
        if not self._aborted or not data:
            return []  # the common case: no header walk
        upper = fetch_offset
        for h in iter_batches(data):
            upper = h.next_offset
        found: list[AbortedTxn] = []
        for segment in self._segments[self._segment_holding(fetch_offset) :]:
            own = self._aborted.get(segment.base_offset, [])
            entries, complete = collect(own, fetch_offset, upper)
            found.extend(entries)
            if complete:
                break
        return found

    # ---- truncation ----

    def _truncate_txn_indexes(self, log_end_offset: int) -> None:
        for base, entries in list(self._aborted.items()):
            kept = truncated(entries, log_end_offset)
            if not kept:
                del self._aborted[base]
                self._store.delete(txn_index_file_name(base))
            elif len(kept) != len(entries):
                self._aborted[base] = kept
                self._store.write_atomic(
                    txn_index_file_name(base), b"".join(e.encode() for e in kept)
                )
