"""One segment's file names (Kafka's 20-digit base offsets) and what the log keeps in memory
about it, so reads never rescan it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property

from broker.log.index import INT32_MAX, OffsetIndex
from broker.log.retention import SegmentView
from broker.log.store import SegmentStore
from minibroker.core.records import BatchHeader

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (txn_index.py), only where there are some
NO_TIMESTAMP = -1


def segment_file_name(base_offset: int) -> str:
    """Kafka's name: the base offset zero-padded to 20 digits, e.g. 00000000000000000005.log."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def txn_index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


def base_offset_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)]
    if name.endswith(suffix) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


@dataclass
class Segment:
    """What the log keeps in memory about one segment, so reads never rescan it."""

    base_offset: int
    index: OffsetIndex
    size: int
    next_offset: int
    # The largest record timestamp of its batches (Kafka's maxTimestampSoFar), -1 for none:
    # retention by time reads it.
    max_timestamp: int = NO_TIMESTAMP
    # The first batch's max timestamp (Kafka's rollingBasedTimestamp): segment.ms counts from it.
    rolling_timestamp: int = NO_TIMESTAMP
    # When this process created or opened it (wall ms): segment.ms counts from it when the
    # batches carry no timestamps.
    created_ms: int = 0
    roll_jitter_ms: int = 0  # Kafka's LogSegment.rollJitterMs, drawn when it is created

    @classmethod
    def empty(cls, base_offset: int, index_interval_bytes: int, created_ms: int = 0) -> Segment:
        index = OffsetIndex(base_offset, index_interval_bytes)
        return cls(base_offset, index, 0, base_offset, created_ms=created_ms)

    def note_batch(self, max_timestamp: int) -> None:
        """A batch was appended (or recovered) with this max timestamp."""
        if self.rolling_timestamp == NO_TIMESTAMP and self.size == 0:
            self.rolling_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp

    def should_roll(
        self,
        size: int,
        last_offset: int,
        max_timestamp: int,
        *,
        segment_bytes: int,
        segment_ms: int,
        clock: Callable[[], int],
    ) -> bool:
        """Kafka's LogSegment.shouldRoll, before appending `size` bytes: whether the append
        would overflow segment.bytes or the int32 relative offsets, or segment.ms (less the
        jitter) has passed between the first batch's timestamp and the append's (between the
        segment's creation and now when the batches carry none). An empty segment takes any
        append."""
        if self.size == 0:
            return False
        if self.size + size > segment_bytes or last_offset - self.base_offset > INT32_MAX:
            return True
        if self.rolling_timestamp != NO_TIMESTAMP:
            waited = max_timestamp - self.rolling_timestamp
        else:
            waited = clock() - self.created_ms
        return waited > segment_ms - self.roll_jitter_ms

    def retention_view(self, store: SegmentStore) -> SegmentView:
        """What the retention rule needs (retention.py); a segment without timestamps is as old
        as its file (Kafka's LogSegment.largestTimestamp)."""
        largest = self.max_timestamp
        if largest == NO_TIMESTAMP:
            largest = store.mtime_ms(self.log_name)
        return SegmentView(self.base_offset, self.size, largest)

    # Names made once: every read and append of the segment asks for them.
    @cached_property
    def log_name(self) -> str:
        return segment_file_name(self.base_offset)

    @cached_property
    def index_name(self) -> str:
        return index_file_name(self.base_offset)


def runs_within(
    headers: Sequence[BatchHeader], segment_bytes: int
) -> list[tuple[int, int, list[BatchHeader]]] | None:
    """Consecutive batches (positions in one buffer) grouped into runs that each fit in
    `segment_bytes`: per run its start and end in the buffer and its headers with positions
    relative to the start. None if one batch alone does not fit."""
    if any(h.size > segment_bytes for h in headers):
        return None
    runs: list[tuple[int, int, list[BatchHeader]]] = []
    for h in headers:
        if runs and h.position + h.size - runs[-1][0] <= segment_bytes:
            start, _, run = runs[-1]
            runs[-1] = (start, h.position + h.size, run)
        else:
            start, run = h.position, []
            runs.append((start, h.position + h.size, run))
        run.append(dataclasses.replace(h, position=h.position - start))
    return runs


def delete_segment_files(store: SegmentStore, base_offsets: Sequence[int]) -> None:
    for base in base_offsets:
        store.delete(segment_file_name(base))
        store.delete(index_file_name(base))
        store.delete(txn_index_file_name(base))
