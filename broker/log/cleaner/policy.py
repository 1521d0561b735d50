"""Which part of a compacted log the cleaner cleans, and when (Kafka 2.6's
LogCleanerManager.cleanableOffsets, grabFilthiestCompactedLog, needCompactionDueToMaxLag and
Cleaner.groupSegmentsBySize, LogCleaner.clean's delete horizon). Pure: segments, offsets, time.

- The dirty section starts at the cleaner's checkpoint (the log start if there is none, or if
  it lies outside the log) and ends at the first uncleanable offset: the active segment's base,
  the high watermark, and the first segment whose largest timestamp is within
  `min.compaction.lag.ms` of now, whichever is first.
- A log is cleaned when its dirty ratio (dirty bytes / (clean + dirty bytes)) reaches
  `min.cleanable.dirty.ratio`, or when a dirty segment's first record is older than
  `max.compaction.lag.ms` (KIP-354); the filthiest log goes first.
- Tombstones are removed from segments last modified before the delete horizon: the last
  clean segment's modification time minus `delete.retention.ms`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.log.segment_replacement import SegmentInfo

LONG_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    min_cleanable_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    delete_retention_ms: int = 86_400_000


@dataclass(frozen=True, slots=True)
class Cleanable:
    """A log's dirty section [first_dirty, first_uncleanable) and how dirty it is."""

    first_dirty: int
    first_uncleanable: int
    clean_bytes: int
    dirty_bytes: int
    overdue: bool  # a dirty segment passed max.compaction.lag.ms
    checkpoint_reset: bool  # the checkpoint lay outside the log

    @property
    def ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0

    def due(self, config: CompactionConfig) -> bool:
        """grabFilthiestCompactedLog's test."""
        if self.dirty_bytes <= 0:
            return False
        return self.overdue or self.ratio >= config.min_cleanable_ratio


def cleanable(
    segments: Sequence[SegmentInfo],
    config: CompactionConfig,
    *,
    checkpoint: int | None,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int,
    now_ms: int,
) -> Cleanable:
    reset = checkpoint is not None and not log_start_offset <= checkpoint <= log_end_offset
    first_dirty = log_start_offset if checkpoint is None or reset else checkpoint
    limit = min(segments[-1].base_offset, high_watermark)
    lag = max(config.min_compaction_lag_ms, 0)
    if lag > 0:
        for s in segments[:-1]:
            if s.next_offset > first_dirty and s.largest_timestamp_ms > now_ms - lag:
                limit = min(limit, s.base_offset)
                break
    # Whole segments only: those wholly below the limit (never the active one); the first
    # other segment's base bounds the offsets the cleaner reads.
    count = 0
    while count < len(segments) - 1 and segments[count].next_offset <= limit:
        count += 1
    uncleanable = max(segments[count].base_offset, first_dirty)
    clean = sum(s.size for s in segments[:count] if s.next_offset <= first_dirty)
    dirty_segments = [s for s in segments[:count] if s.next_offset > first_dirty]
    dirty = sum(s.size for s in dirty_segments)
    overdue = config.max_compaction_lag_ms < LONG_MAX and any(
        s.rolling_timestamp_ms >= 0
        and now_ms - s.rolling_timestamp_ms > config.max_compaction_lag_ms
        for s in dirty_segments
    )
    return Cleanable(first_dirty, uncleanable, clean, dirty, overdue, reset)


def delete_horizon_ms(
    segments: Sequence[SegmentInfo], first_dirty: int, delete_retention_ms: int
) -> int:
    """Tombstones in segments last modified before this are removed (LogCleaner.clean: the last
    clean segment's modification time minus delete.retention.ms; 0 before the first clean)."""
    clean = [s for s in segments if s.base_offset < first_dirty]
    return clean[-1].last_modified_ms - delete_retention_ms if clean else 0


def group_by_size(segments: Sequence[SegmentInfo], segment_bytes: int) -> list[list[SegmentInfo]]:
    """Consecutive segments merged into groups that fit one segment (groupSegmentsBySize), so
    cleaning also shrinks the number of segments; offsets within a group stay within int32 of
    its base."""
    groups: list[list[SegmentInfo]] = []
    for s in segments:
        if groups:
            group = groups[-1]
            size = sum(g.size for g in group)
            if size + s.size <= segment_bytes and s.next_offset - group[0].base_offset <= 2**31 - 1:
                group.append(s)
                continue
        groups.append([s])
    return groups
