"""One partition's log: record batches in segment files of a SegmentStore, read by offset.

Rules kept: batch offsets are contiguous from the log start to the log end offset (LEO), across
segments; only whole, CRC-valid batches survive recovery; the leader-epoch cache never names an
offset at or past the LEO (reference §4.2). Only batch headers are ever parsed, never records.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, format_epochs, parse_epochs
from broker.log.index import ENTRY_SIZE, INT32_MAX, OffsetIndex
from broker.log.store import SegmentStore
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from minibroker.core import batch_validation, records
from minibroker.core.errors import ErrorCode
from minibroker.core.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader, RecordError

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
# Recovery reads a segment in chunks of this size, so a 1 GiB segment is never in memory whole.
RECOVERY_CHUNK_BYTES = 4 << 20


def segment_file_name(base_offset: int) -> str:
    """Kafka's name: the base offset zero-padded to 20 digits, e.g. 00000000000000000005.log."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def _base_offset_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)]
    if name.endswith(suffix) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class OffsetOutOfRange(Exception):
    """A fetch offset below the log start or above the LEO."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, fetch_offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"fetch offset {fetch_offset} is out of range: log start offset {log_start_offset}, "
            f"log end offset {log_end_offset}"
        )
        self.fetch_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    batch_count: int
    size_bytes: int


@dataclass
class _Segment:
    """What the log keeps in memory about one segment, so reads never rescan it."""

    base_offset: int
    index: OffsetIndex
    size: int
    next_offset: int

    @classmethod
    def empty(cls, base_offset: int, index_interval_bytes: int) -> _Segment:
        return cls(base_offset, OffsetIndex(base_offset, index_interval_bytes), 0, base_offset)

    @property
    def log_name(self) -> str:
        return segment_file_name(self.base_offset)

    @property
    def index_name(self) -> str:
        return index_file_name(self.base_offset)


class Log:
    """A partition's log over a SegmentStore; opening it recovers whatever the store holds."""

    def __init__(
        self,
        store: SegmentStore,
        *,
        segment_bytes: int = 1 << 30,
        index_interval_bytes: int = 4096,
        max_batch_bytes: int = 1048588,
    ) -> None:
        # Positions are int32 in the index, as in Kafka (segment.bytes is an int there).
        if not HEADER_SIZE <= segment_bytes <= INT32_MAX:
            raise ValueError(f"segment_bytes={segment_bytes} must be in [61, 2^31-1]")
        self._store = store
        self._segment_bytes = segment_bytes
        self._index_interval_bytes = index_interval_bytes
        self._max_batch_bytes = max_batch_bytes
        self._segments: list[_Segment] = []
        self._dirty: set[int] = set()  # base offsets of segments with bytes not yet flushed
        self._recover()
        self.epoch_cache = LeaderEpochCache(self._load_epochs(), on_change=self._write_epochs)
        self.epoch_cache.truncate_from_end(self.log_end_offset)

    # ---- offsets ----

    @property
    def log_start_offset(self) -> int:
        return self._segments[0].base_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    def segment_base_offsets(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    # ---- recovery ----

    def _recover(self) -> None:
        """Keep the longest run of whole, valid, contiguous batches from the first segment on;
        everything after the first flaw (torn tail, bad CRC, offset gap) is removed."""
        names = self._store.list()
        bases = sorted(b for n in names if (b := _base_offset_of(n, LOG_SUFFIX)) is not None)
        for name in names:
            # An index without its segment is left over from a deletion cut short.
            base = _base_offset_of(name, INDEX_SUFFIX)
            if base is not None and base not in bases:
                self._store.delete(name)
        for i, base in enumerate(bases):
            if self._segments and base != self.log_end_offset:
                self._delete_files(bases[i:])
                break
            segment = self._recover_segment(base)
            self._segments.append(segment)
            # The store may hold bytes an earlier process never flushed; the first flush
            # must cover them too.
            self._dirty.add(base)
            if segment.size < self._store.size(segment.log_name):
                self._store.truncate(segment.log_name, segment.size)
                self._delete_files(bases[i + 1 :])
                break
        if not self._segments:
            self._segments.append(self._create_segment(0))

    def _recover_segment(self, base_offset: int) -> _Segment:
        """The segment's valid prefix (its file is not cut here) with a rebuilt index."""
        segment = _Segment.empty(base_offset, self._index_interval_bytes)
        for position, h in self._scan_valid(segment.log_name):
            if h.base_offset != segment.next_offset:
                break
            segment.index.maybe_append(h.base_offset, position)
            segment.size = position + h.size
            segment.next_offset = h.next_offset
        index_bytes = segment.index.to_bytes()
        stored = self._store.read(segment.index_name, 0, len(index_bytes) + ENTRY_SIZE)
        if stored != index_bytes:
            self._store.write_atomic(segment.index_name, index_bytes)
        return segment

    def _scan_valid(self, name: str) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of the whole, CRC-valid batches at the start of file `name`."""
        size = self._store.size(name)
        position = 0
        while position < size:
            chunk = self._store.read(name, position, RECOVERY_CHUNK_BYTES)
            length, headers = records.valid_prefix(chunk)
            if length == 0:
                # Either a flaw here, or one batch larger than a chunk: read exactly that batch.
                length, headers = self._valid_large_batch(name, position, chunk, size)
                if length == 0:
                    return
            for h in headers:
                yield position + h.position, h
            position += length

    def _valid_large_batch(
        self, name: str, position: int, chunk: bytes, file_size: int
    ) -> tuple[int, list[BatchHeader]]:
        if len(chunk) < HEADER_SIZE:
            return 0, []
        h = records.read_header(chunk, 0)
        if h.size <= len(chunk) or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
            return 0, []  # it fitted in the chunk, so it failed on its own: a flaw
        if position + h.size > file_size:
            return 0, []  # torn: the file ends inside it
        return records.valid_prefix(self._store.read(name, position, h.size))

    def _load_epochs(self) -> list[EpochEntry]:
        size = self._store.size(LEADER_EPOCH_CHECKPOINT)
        return parse_epochs(self._store.read(LEADER_EPOCH_CHECKPOINT, 0, size)) if size else []

    def _write_epochs(self, entries: tuple[EpochEntry, ...]) -> None:
        # Rewritten whole on every change (reference §4.3).
        self._store.write_atomic(LEADER_EPOCH_CHECKPOINT, format_epochs(entries))

    # ---- segment files ----

    def _create_segment(self, base_offset: int) -> _Segment:
        segment = _Segment.empty(base_offset, self._index_interval_bytes)
        for name in (segment.log_name, segment.index_name):
            self._store.delete(name)  # a stale file of that name would corrupt the new segment
            self._store.append(name, b"")
        self._dirty.add(base_offset)  # so the next flush makes the new files durable
        return segment

    def _delete_files(self, base_offsets: Sequence[int]) -> None:
        for base in base_offsets:
            self._store.delete(segment_file_name(base))
            self._store.delete(index_file_name(base))
            self._dirty.discard(base)

    # ---- appends ----

    def append_as_leader(self, data: bytes, leader_epoch: int) -> AppendInfo:
        """Validate the producer's batches, give them offsets from the LEO and the leader's
        epoch, and append them. RecordError leaves the log unchanged."""
        stamped = batch_validation.validate_and_stamp(
            data,
            next_offset=self.log_end_offset,
            partition_leader_epoch=leader_epoch,
            max_batch_bytes=self._max_batch_bytes,
        )
        return self._append(stamped.data, stamped.batches)

    def append_as_follower(self, data: bytes) -> AppendInfo:
        """Append batches fetched from the leader with their offsets as given; they must start
        at the LEO and be contiguous. RecordError leaves the log unchanged."""
        headers = batch_validation.validate_from_leader(data, max_batch_bytes=self._max_batch_bytes)
        expected = self.log_end_offset
        for h in headers:
            if h.base_offset != expected:
                raise RecordError(
                    ErrorCode.CORRUPT_MESSAGE,
                    f"batch at byte {h.position} has base offset {h.base_offset}, expected "
                    f"{expected} (log end offset {self.log_end_offset})",
                )
            expected = h.next_offset
        return self._append(data, headers)

    def _append(self, data: bytes, headers: Sequence[BatchHeader]) -> AppendInfo:
        if len(data) > self._segment_bytes:
            # Kafka's RecordBatchTooLargeException: the append could never fit in a segment.
            raise RecordError(
                ErrorCode.RECORD_LIST_TOO_LARGE,
                f"{len(data)} bytes of batches exceed segment.bytes={self._segment_bytes}",
            )
        active = self._segments[-1]
        if self._should_roll(active, len(data), headers[-1].last_offset):
            active = self._create_segment(self.log_end_offset)
            self._segments.append(active)
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
        assert self.log_end_offset == headers[-1].last_offset + 1
        return AppendInfo(headers[0].base_offset, headers[-1].last_offset, len(headers), len(data))

    def _should_roll(self, active: _Segment, size: int, last_offset: int) -> bool:
        """Roll before an append that would overflow the segment's size or its int32
        relative offsets; an empty segment always takes the append."""
        if active.size == 0:
            return False
        too_big = active.size + size > self._segment_bytes
        return too_big or last_offset - active.base_offset > INT32_MAX

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
        position = self._locate(self._segments[i], fetch_offset).position
        parts: list[bytes] = []
        budget = max_bytes
        for segment in self._segments[i:]:
            data = self._whole_batches(segment, position, budget, limit, min_one=not parts)
            if data:
                parts.append(data)
            budget -= len(data)
            # Go on to the next segment only if this one was read to its end with room left.
            if budget <= 0 or position + len(data) < segment.size or segment.next_offset >= limit:
                break
            position = 0
        return b"".join(parts)

    def _segment_index(self, offset: int) -> int:
        """Index of the segment holding `offset`: the last one whose base is <= it."""
        return bisect.bisect_right(self._segments, offset, key=lambda s: s.base_offset) - 1

    def _locate(self, segment: _Segment, offset: int) -> BatchHeader:
        """The header (position within the segment) of the batch holding `offset`. The index
        puts us within about one index interval of it, so one read usually suffices."""
        position = segment.index.lookup(offset)
        chunk_bytes = self._index_interval_bytes + HEADER_SIZE
        while position < segment.size:
            buf = self._store.read(segment.log_name, position, chunk_bytes)
            at = 0
            while at + HEADER_SIZE <= len(buf):
                h = records.read_header(buf, at)
                if h.last_offset >= offset:
                    return dataclasses.replace(h, position=position + at)
                at += h.size
            if at == 0:
                break
            position += at  # the next header, possibly past a large batch we did not read
        raise AssertionError(f"offset {offset} not found in segment {segment.base_offset}")

    def _whole_batches(
        self, segment: _Segment, position: int, budget: int, limit: int, *, min_one: bool
    ) -> bytes:
        """The whole batches from `position` that fit in `budget` bytes and end below
        `limit`; with `min_one`, the first such batch even if it alone exceeds the budget."""
        buf = self._store.read(segment.log_name, position, min(budget, segment.size - position))
        end = 0
        while end + HEADER_SIZE <= len(buf):
            h = records.read_header(buf, end)
            if h.last_offset >= limit or end + h.size > len(buf):
                break
            end += h.size
        if end == 0 and min_one:
            first = records.read_header(
                self._store.read(segment.log_name, position, HEADER_SIZE), 0
            )
            if first.last_offset < limit:
                return self._store.read(segment.log_name, position, first.size)
        return buf if end == len(buf) else buf[:end]

    def batches(self) -> list[BatchHeader]:
        """Every batch header in the log, positions relative to its segment (diagnostics)."""
        out: list[BatchHeader] = []
        for segment in self._segments:
            out.extend(records.iter_batches(self._store.read(segment.log_name, 0, segment.size)))
        return out

    # ---- truncation and durability ----

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= `offset` (a batch holding `offset` goes
        whole, so the LEO may end below it). Called when a follower truncates (reference §4.4)."""
        if offset >= self.log_end_offset:
            return
        if offset < self.log_start_offset:
            # Kafka's Log.truncateTo does the same when the target precedes every segment.
            self.truncate_fully_and_start_at(offset)
            return
        i = self._segment_index(offset)
        self._delete_files([s.base_offset for s in self._segments[i + 1 :]])
        del self._segments[i + 1 :]
        segment = self._segments[i]
        cut = self._locate(segment, offset)
        self._store.truncate(segment.log_name, cut.position)
        segment.index.truncate_to(cut.base_offset)
        self._store.truncate(segment.index_name, len(segment.index) * ENTRY_SIZE)
        segment.size = cut.position
        segment.next_offset = cut.base_offset
        self._dirty.add(segment.base_offset)
        self.epoch_cache.truncate_from_end(self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Drop the whole log and start empty at `offset`, which becomes the log start
        (a follower whose leader's log starts past its LEO, reference §4.5)."""
        self._delete_files([s.base_offset for s in self._segments])
        self._segments = [self._create_segment(offset)]
        self.epoch_cache.clear()

    def flush(self) -> None:
        """Make every appended byte durable: the active segment, and any segment rolled or
        truncated since the last flush, with their indexes."""
        for base in sorted(self._dirty):
            self._store.flush(segment_file_name(base))
            self._store.flush(index_file_name(base))
        self._dirty.clear()
