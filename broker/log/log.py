"""One partition's log: record batches in segment files of a SegmentStore, read by offset.

Rules kept: batch offsets are contiguous from the log start to the log end offset (LEO), across
segments; only whole, CRC-valid batches survive recovery (recovery.py); the leader-epoch cache
never names an offset at or past the LEO (reference §4.2); nothing is appended before
batch_validation.py has passed it.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Callable, Sequence

from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, format_epochs
from broker.log.index import ENTRY_SIZE, INT32_MAX
from broker.log.log_txns import LogTransactions
from broker.log.log_types import WEEK_MS, AppendInfo, OffsetOutOfRange, wall_clock_ms
from broker.log.producer_state import Duplicate, Refusal
from broker.log.producer_state_manager import ProducerStateManager
from broker.log.recovery import load_epochs, recover_segments
from broker.log.segment import (
    Segment,
    delete_segment_files,
    index_file_name,
    runs_within,
    segment_file_name,
    txn_index_file_name,
)
from broker.log.segment_reads import locate, read_from
from broker.log.segment_replacement import SegmentReplacement
from broker.log.store import SegmentStore
from broker.log.timestamp_search import TimestampSearch
from broker.log.txn_tracker import VerificationGuard
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from minibroker.core import batch_validation
from minibroker.core.errors import ErrorCode
from minibroker.core.records import HEADER_SIZE, NO_PRODUCER_ID, BatchHeader, RecordError


class Log(SegmentReplacement, LogTransactions, TimestampSearch):
    """A partition's log over a SegmentStore; opening it recovers whatever the store holds."""

    def __init__(
        self,
        store: SegmentStore,
        *,
        segment_bytes: int = 1 << 30,
        index_interval_bytes: int = 4096,
        max_batch_bytes: int = 1048588,
        log_start_offset: int = 0,
        gap_horizon: int = 0,
        segment_ms: int = WEEK_MS,
        segment_jitter_ms: int = 0,
        clock: Callable[[], int] = wall_clock_ms,
    ) -> None:
        # Positions are int32 in the index, as in Kafka (segment.bytes is an int there).
        if not HEADER_SIZE <= segment_bytes <= INT32_MAX:
            raise ValueError(f"segment_bytes={segment_bytes} must be in [61, 2^31-1]")
        self._store = store
        self._segment_bytes = segment_bytes
        self._index_interval_bytes = index_interval_bytes
        self._max_batch_bytes = max_batch_bytes
        self._segment_ms = segment_ms
        self._segment_jitter_ms = segment_jitter_ms
        self._clock = clock
        self._dirty: set[int] = set()  # base offsets of segments with bytes not yet flushed
        self._aborted = {}  # segment base -> its .txnindex entries (log_txns.py)
        self._on_epochs_changed: Callable[[Log], None] | None = None
        self._pending_epochs: tuple[EpochEntry, ...] | None = None
        recovered = recover_segments(store, index_interval_bytes, log_start_offset, gap_horizon)
        # Gaps in offsets (compaction's) are taken up to here; cleaning and a cleaned
        # leader's batches raise it, cleaner-offset-checkpoint keeps it (recovery.py).
        self.gap_horizon = gap_horizon
        self._segments: list[Segment] = recovered.segments
        # The store may hold bytes an earlier process never flushed; the first flush must
        # cover them too.
        self._dirty.update(s.base_offset for s in self._segments)
        opened = clock()
        for segment in self._segments:
            segment.created_ms = opened
        if not self._segments:
            self._segments.append(self._create_segment(log_start_offset))
        # Kafka's Log: max(checkpointed, first segment's base); the bytes before it stay in
        # the first segment until retention deletes that segment whole.
        self._log_start_offset = max(log_start_offset, self._segments[0].base_offset)
        entries, rebuilt = load_epochs(store, recovered)
        if rebuilt:
            self._write_epochs(tuple(entries))
        self.epoch_cache = LeaderEpochCache(entries, on_change=self._write_epochs)
        before = self.epoch_cache.entries
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        if self.epoch_cache.entries != before:
            recovered.repairs.append(
                f"{LEADER_EPOCH_CHECKPOINT}: dropped entries at or past the log end offset "
                f"{self.log_end_offset}"
            )
        # Kafka's Log: the earliest epoch may not have been written before a hard stop.
        self.epoch_cache.truncate_from_start(self._log_start_offset)
        # Idempotent producers: from the latest snapshot and the batches after it, on first need.
        self._producers = ProducerStateManager(
            store, log_start=self._segments[0].base_offset, log_end=self.log_end_offset,
            repairs=recovered.repairs,
        )  # fmt: skip
        self._load_txn_indexes(recovered.repairs)
        # What opening the log had to repair, one sentence each (the broker logs them).
        self.repairs: tuple[str, ...] = tuple(recovered.repairs)

    # ---- offsets ----

    @property
    def log_start_offset(self) -> int:
        """The first offset a reader may ask for (Kafka's logStartOffset): the first segment's
        base, or past it after DeleteRecords or a follower taking its leader's."""
        return self._log_start_offset

    @property
    def store(self) -> SegmentStore:
        """The partition directory's files (the log cleaner reads them in its thread)."""
        return self._store

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        """The bytes of every segment (Kafka's Log.size)."""
        return sum(s.size for s in self._segments)

    def segment_base_offsets(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    # ---- epochs ----

    def _write_epochs(self, entries: tuple[EpochEntry, ...]) -> None:
        # Rewritten whole on every change (reference §4.3), now or by the broker's writer.
        if self._on_epochs_changed is None:
            self._store.write_atomic(LEADER_EPOCH_CHECKPOINT, format_epochs(entries))
            return
        self._pending_epochs = entries
        self._on_epochs_changed(self)

    def defer_epoch_writes(self, on_changed: Callable[[Log], None]) -> None:
        """From now on report epoch changes to `on_changed` (on the loop), which writes them
        later through take_epoch_checkpoint / write_epoch_checkpoint (epoch_checkpoints.py)."""
        self._on_epochs_changed = on_changed

    def take_epoch_checkpoint(self) -> bytes | None:
        """The checkpoint's new contents if a change awaits its write (on the loop)."""
        entries, self._pending_epochs = self._pending_epochs, None
        return None if entries is None else format_epochs(entries)

    def write_epoch_checkpoint(self, data: bytes) -> None:
        """Write the checkpoint (in a worker thread)."""
        self._store.write_atomic(LEADER_EPOCH_CHECKPOINT, data)

    # ---- segment files ----

    def _create_segment(self, base_offset: int) -> Segment:
        segment = Segment.empty(base_offset, self._index_interval_bytes, self._clock())
        if self._segment_jitter_ms > 0:  # Kafka's LogSegment.rollJitterMs, drawn per segment
            segment.roll_jitter_ms = random.randrange(self._segment_jitter_ms)
        self._store.delete(txn_index_file_name(base_offset))
        self._aborted.pop(base_offset, None)
        for name in (segment.log_name, segment.index_name):
            self._store.delete(name)  # a stale file of that name would corrupt the new segment
            self._store.append(name, b"")
        self._dirty.add(base_offset)  # so the next flush makes the new files durable
        return segment

    def _delete_files(self, base_offsets: Sequence[int]) -> None:
        delete_segment_files(self._store, base_offsets)
        self._dirty.difference_update(base_offsets)

    # ---- appends ----

    def append_as_leader(
        self,
        data: bytes,
        leader_epoch: int,
        *,
        transactional: bool = False,
        from_coordinator: bool = False,
        verified: VerificationGuard | None | bool = False,
    ) -> AppendInfo:
        """Validate the producer's batches, give them offsets from the LEO and the leader's
        epoch, and append them. RecordError leaves the log unchanged; so does an idempotent
        producer's retry of a batch it appended before, answered with that append's offsets
        (producer_state.py; `verified` is its transaction verification guard)."""
        stamped = batch_validation.validate_and_stamp(
            data,
            next_offset=self.log_end_offset,
            partition_leader_epoch=leader_epoch,
            max_batch_bytes=self._max_batch_bytes,
            transactional=transactional,
        )
        idempotent = any(h.producer_id != NO_PRODUCER_ID for h in stamped.batches)
        if idempotent:
            verdict = self._txn_table().check(
                stamped.batches, sequences=not from_coordinator, verified=verified
            )
            if isinstance(verdict, Refusal):
                raise RecordError(verdict.code, verdict.message)
            if isinstance(verdict, Duplicate):  # a retry: the first append's offsets
                return AppendInfo(verdict.first_offset, verdict.last_offset, 0, 0)
        return self._append(stamped.data, stamped.batches)

    def append_as_follower(self, data: bytes) -> AppendInfo:
        """Append batches fetched from the leader with their offsets as given; they must start
        at the LEO and be contiguous. RecordError leaves the log unchanged."""
        headers = batch_validation.validate_from_leader(data, max_batch_bytes=self._max_batch_bytes)
        expected, gap_end = self.log_end_offset, 0
        for h in headers:
            # Offsets increase from the LEO on; a compacted leader's batches leave gaps.
            if h.base_offset < expected:
                raise RecordError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"batch at byte {h.position} has base offset {h.base_offset}, below "
                    f"{expected} (log end offset {self.log_end_offset})",
                )
            gap_end = h.base_offset if h.base_offset > expected else gap_end
            expected = h.next_offset
        if len(data) <= self._segment_bytes:
            info = self._append(data, headers)
        else:
            info = self._append_in_parts(data, headers)
        self.gap_horizon = max(self.gap_horizon, gap_end)
        return info

    def _append_in_parts(self, data: bytes, headers: Sequence[BatchHeader]) -> AppendInfo:
        """A fetch answer larger than segment.bytes, appended in runs of whole batches that
        each fit a segment (Kafka 2.6 refuses the whole answer with RecordBatchTooLarge and the
        follower stalls; a test bed with small segments must replicate)."""
        runs = runs_within(headers, self._segment_bytes)
        if runs is None:
            raise RecordError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"a fetched batch exceeds segment.bytes={self._segment_bytes}",
            )
        for start, end, run in runs:
            self._append(data[start:end], run)
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, len(headers), len(data))

    def _append(self, data: bytes, headers: Sequence[BatchHeader]) -> AppendInfo:
        if len(data) > self._segment_bytes:
            # Kafka's RecordBatchTooLargeException: the append could never fit in a segment.
            raise RecordError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{len(data)} bytes of batches exceed segment.bytes={self._segment_bytes}",
            )
        active = self._segments[-1]
        max_timestamp = max(h.max_timestamp for h in headers)
        rolls = active.should_roll(
            len(data), headers[-1].last_offset, max_timestamp,
            segment_bytes=self._segment_bytes, segment_ms=self._segment_ms, clock=self._clock,
        )  # fmt: skip
        if rolls:
            self._producers.take_snapshot(self.log_end_offset)  # Kafka snapshots at each roll
            active = self._create_segment(self.log_end_offset)
            self._segments.append(active)
        self._before_append(headers)
        active.note_batch(max_timestamp)
        start = active.size
        self._store.append(active.log_name, data)
        index_bytes = b"".join(
            active.index.maybe_append(h.base_offset, start + h.position) for h in headers
        )
        if index_bytes:
            self._store.append(active.index_name, index_bytes)
        active.size += len(data)
        active.next_offset = headers[-1].next_offset
        self._dirty.add(active.base_offset)
        for h in headers:
            if h.partition_leader_epoch >= 0:
                self.epoch_cache.assign(h.partition_leader_epoch, h.base_offset)
        self._record_appended(data, headers)
        assert self.log_end_offset == headers[-1].last_offset + 1
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, len(headers), len(data))

    def roll(self) -> None:
        """Start a new empty active segment at the log end offset (unless it is empty)."""
        if self._segments[-1].size > 0:
            self._producers.take_snapshot(self.log_end_offset)
            self._segments.append(self._create_segment(self.log_end_offset))

    # ---- reads ----

    def read(self, fetch_offset: int, max_bytes: int, max_offset: int | None = None) -> bytes:
        """Whole batches from the one holding `fetch_offset`, at most `max_bytes` of them but
        always the first (KIP-74), and only those ending below `max_offset` (the HW, for
        consumers). b"" at the LEO or at `max_offset`."""
        log_end_offset = self.log_end_offset
        if not self.log_start_offset <= fetch_offset <= log_end_offset:
            raise OffsetOutOfRange(fetch_offset, self.log_start_offset, log_end_offset)
        limit = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        if fetch_offset >= limit:
            return b""
        i = self._segment_index(fetch_offset)
        while self._segments[i].next_offset <= fetch_offset or not self._segments[i].size:
            i += 1  # in a gap compaction left (or an emptied segment): a later one holds it
        position = locate(
            self._store, self._segments[i], fetch_offset, self._index_interval_bytes
        ).position
        return read_from(self._store, self._segments[i:], position, max_bytes, limit)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment holding `offset`: the last one whose base is <= it."""
        return bisect.bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1

    # ---- truncation and durability ----

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= `offset` (a batch holding `offset` goes
        whole, so the LEO may end below it). Called when a follower truncates (reference §4.4)."""
        if offset >= self.log_end_offset:
            return
        if offset < self._segments[0].base_offset:
            # Kafka's Log.truncateTo does the same when the target precedes every segment.
            self.truncate_fully_and_start_at(offset)
            return
        self._log_start_offset = min(offset, self._log_start_offset)
        i = self._segment_index(offset)
        self._delete_files([s.base_offset for s in self._segments[i + 1 :]])
        del self._segments[i + 1 :]
        segment = self._segments[i]
        if segment.next_offset <= offset:  # in a gap after this segment: nothing to cut here
            self.epoch_cache.truncate_from_end(self.log_end_offset)
            self._producers.truncate_to(self.log_end_offset)
            self._truncate_txn_indexes(self.log_end_offset)
            return
        cut = locate(self._store, segment, offset, self._index_interval_bytes)
        self._store.truncate(segment.log_name, cut.position)
        segment.index.truncate_to(cut.base_offset)
        self._store.truncate(segment.index_name, len(segment.index) * ENTRY_SIZE)
        segment.size = cut.position
        segment.next_offset = min(cut.base_offset, offset)  # offset may lie in a gap
        self._dirty.add(segment.base_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)
        self._producers.truncate_to(self.log_end_offset)
        self._truncate_txn_indexes(self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start empty at `offset`, which becomes the log start
        (a follower whose leader's log starts past its LEO, reference §4.5)."""
        self._delete_files([s.base_offset for s in self._segments])
        self._segments = [self._create_segment(offset)]
        self._log_start_offset = offset
        self.epoch_cache.clear()
        self._producers.clear()
        self._aborted.clear()

    def reconfigure(
        self,
        *,
        segment_bytes: int,
        max_batch_bytes: int,
        segment_ms: int = WEEK_MS,
        segment_jitter_ms: int = 0,
    ) -> None:
        """New sizes from a topic config change (Kafka's Log.updateConfig): the next roll and
        the next append use them; nothing written changes."""
        if not HEADER_SIZE <= segment_bytes <= INT32_MAX:
            raise ValueError(f"segment_bytes={segment_bytes} must be in [61, 2^31-1]")
        self._segment_bytes = segment_bytes
        self._max_batch_bytes = max_batch_bytes
        self._segment_ms = segment_ms
        self._segment_jitter_ms = segment_jitter_ms

    # ---- the log start offset and retention (Kafka's Log.deleteOldSegments) ----

    def maybe_increment_log_start_offset(self, offset: int, high_watermark: int) -> bool:
        """Move the log start offset forward to `offset` (DeleteRecords, a follower taking its
        leader's, retention): never past the HW (Kafka raises OffsetOutOfRange; callers check
        first), never backwards. The epochs before it are forgotten (Kafka 2.6 keeps the
        producers in memory until they expire). Whether it moved."""
        if offset > high_watermark:
            raise OffsetOutOfRange(offset, self._log_start_offset, high_watermark)
        if offset <= self._log_start_offset:
            return False
        self._log_start_offset = offset
        self.epoch_cache.truncate_from_start(offset)
        self._producers.delete_before(offset)
        return True

    def close(self) -> None:
        """Give back the descriptors of the log's files (the log is no longer hosted here);
        an epoch change not yet written is dropped (the partition may be deleted next)."""
        self._pending_epochs = None
        self._store.close()

    def flush(self) -> None:
        """Make every appended byte durable: the active segment, and any segment rolled or
        truncated since the last flush, with their indexes."""
        for base in sorted(self._dirty):
            self._store.flush(segment_file_name(base))
            self._store.flush(index_file_name(base))
            if base in self._aborted:  # Kafka's LogSegment.flush: the txn index too
                self._store.flush(txn_index_file_name(base))
        self._dirty.clear()
