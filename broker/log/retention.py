"""Which old segments a log deletes, by Kafka 2.6's rules (`Log.deleteOldSegments` and
`Log.deletableSegments`, core/src/main/scala/kafka/log/Log.scala): pure, given the segments,
the offsets and the time; the log's shell does the deleting (issue 27, part 1).

- With `delete` in `cleanup.policy`, three passes in Kafka's order: retention by time (a segment
  goes when now - its largest timestamp > `retention.ms`; < 0 disables), by size (while the log
  is larger than `retention.bytes` by at least the oldest segment's size; < 0 disables), and the
  log-start-offset breach (a segment whose next segment starts at or below the log start
  offset). Without `delete`, only the start-offset breach.
- Each pass takes segments from the oldest while its predicate holds, and only while the high
  watermark has reached the segment's end (the next segment's base, or the log end offset for
  the active segment); an empty active segment never goes.
- When every segment would go, the log rolls first (a new empty active segment at the log end
  offset), so a log always keeps one segment; the log start offset then moves to the first
  remaining segment's base (`maybeIncrementLogStartOffset`: never backwards).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SegmentView:
    """What the rule needs of a segment: Kafka's `largestTimestamp` is the largest record
    timestamp, or the file's modification time when the segment has none."""

    base_offset: int
    size_bytes: int
    largest_timestamp_ms: int


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    retention_ms: int = 7 * 24 * 3600 * 1000  # log.retention.hours 168
    retention_bytes: int = -1  # log.retention.bytes
    delete: bool = True  # "delete" in cleanup.policy


@dataclass(frozen=True, slots=True)
class RetentionDecision:
    """Delete the `deleted` oldest segments (after rolling, if `roll_first`); the log start
    offset becomes `log_start_offset`. `reasons` names each pass that deleted, in order."""

    deleted: tuple[int, ...]  # base offsets, oldest first
    roll_first: bool
    log_start_offset: int
    reasons: tuple[str, ...]

    @property
    def nothing(self) -> bool:
        return not self.deleted


Predicate = Callable[[SegmentView, SegmentView | None], bool]


def deletable(
    segments: Sequence[SegmentView],
    predicate: Predicate,
    *,
    high_watermark: int,
    log_end_offset: int,
) -> int:
    """How many of the oldest segments go (Log.deletableSegments): while the predicate holds
    and the high watermark is at or past the segment's end; an empty last segment stays."""
    count = 0
    for i, segment in enumerate(segments):
        following = segments[i + 1] if i + 1 < len(segments) else None
        upper = following.base_offset if following is not None else log_end_offset
        last_and_empty = following is None and segment.size_bytes == 0
        if high_watermark >= upper and predicate(segment, following) and not last_and_empty:
            count += 1
        else:
            break
    return count


def decide(
    segments: Sequence[SegmentView],
    policy: RetentionPolicy,
    *,
    now_ms: int,
    log_start_offset: int,
    high_watermark: int,
    log_end_offset: int,
) -> RetentionDecision:
    """The segments one retention check deletes (the three passes run one after another, each
    on what the one before left)."""
    left = list(segments)
    gone: list[int] = []
    reasons: list[str] = []
    roll = False

    def run(reason: str, predicate: Predicate) -> None:
        nonlocal left, roll
        n = deletable(left, predicate, high_watermark=high_watermark, log_end_offset=log_end_offset)
        if n == 0:
            return
        if n == len(left):
            # Kafka rolls so that the log keeps an (empty) active segment at the log end.
            roll = True
            left.append(SegmentView(log_end_offset, 0, now_ms))
        gone.extend(s.base_offset for s in left[:n])
        left = left[n:]
        reasons.append(reason)

    if policy.delete and policy.retention_ms >= 0:
        run(
            f"retention time {policy.retention_ms} ms breach",
            lambda s, _next: now_ms - s.largest_timestamp_ms > policy.retention_ms,
        )
    size = sum(s.size_bytes for s in left)
    if policy.delete and policy.retention_bytes >= 0 and size >= policy.retention_bytes:
        excess = size - policy.retention_bytes

        def over_size(segment: SegmentView, _next: SegmentView | None) -> bool:
            nonlocal excess
            if excess - segment.size_bytes >= 0:
                excess -= segment.size_bytes
                return True
            return False

        run(f"retention size {policy.retention_bytes} bytes breach", over_size)
    run(
        f"log start offset {log_start_offset} breach",
        lambda _s, following: following is not None and following.base_offset <= log_start_offset,
    )
    start = max(log_start_offset, left[0].base_offset) if left else log_start_offset
    return RetentionDecision(tuple(gone), roll, start, tuple(reasons))
