"""broker/log/retention.py: Kafka 2.6's deleteOldSegments rules, after LogTest's
shouldDeleteTimeBasedSegmentsReadyToBeDeleted,
shouldNotDeleteTimeBasedSegmentsWhenNoneReadyToBeDeleted, shouldDeleteSizeBasedSegments,
shouldNotDeleteSizeBasedSegmentsWhenUnderRetentionSize,
shouldDeleteStartOffsetBreachedSegmentsWhenPolicyDoesNotIncludeDelete,
shouldNotDeleteSegmentsWhenPolicyDoesNotIncludeDelete and testLogDeletionAfterDeleteRecords."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.log.retention import (
    RetentionDecision,
    RetentionPolicy,
    SegmentView,
    decide,
    deletable,
)

NOW = 1_000_000


def log(*specs: tuple[int, int, int]) -> list[SegmentView]:
    """(base offset, bytes, age in ms) per segment, oldest first."""
    return [SegmentView(base, size, NOW - age) for base, size, age in specs]


# Three full segments of 10 records each and an active one holding 5: LEO 35.
SEGMENTS = log((0, 1000, 5000), (10, 1000, 4000), (20, 1000, 3000), (30, 500, 100))


def run(
    policy: RetentionPolicy,
    segments: list[SegmentView] = SEGMENTS,
    *,
    start: int = 0,
    hw: int = 35,
    leo: int = 35,
) -> RetentionDecision:
    return decide(
        segments, policy, now_ms=NOW, log_start_offset=start, high_watermark=hw,
        log_end_offset=leo,
    )  # fmt: skip


def test_time_based_segments_ready_to_be_deleted_go_and_the_start_offset_follows() -> None:
    got = run(RetentionPolicy(retention_ms=3500))
    assert got.deleted == (0, 10) and not got.roll_first
    assert got.log_start_offset == 20
    assert got.reasons == ("retention time 3500 ms breach",)


def test_no_time_based_segment_ready_nothing_goes() -> None:
    assert run(RetentionPolicy(retention_ms=10_000)).nothing
    assert run(RetentionPolicy(retention_ms=-1)).nothing  # < 0: kept for ever


def test_size_based_segments_go_while_the_log_is_larger_by_a_whole_segment() -> None:
    # 3,500 bytes against 2,000: 1,500 over, so only the oldest (1,000) may go.
    got = run(RetentionPolicy(retention_ms=-1, retention_bytes=2000))
    assert (got.deleted, got.log_start_offset) == ((0,), 10)
    # Under the retention size: nothing.
    assert run(RetentionPolicy(retention_ms=-1, retention_bytes=4000)).nothing


def test_nothing_goes_past_the_high_watermark() -> None:
    # HW 15: segment 10-19 still holds records not yet replicated everywhere.
    got = run(RetentionPolicy(retention_ms=0), hw=15)
    assert (got.deleted, got.log_start_offset) == ((0,), 10)


def test_when_every_segment_would_go_the_log_rolls_first_and_keeps_an_empty_one() -> None:
    got = run(RetentionPolicy(retention_ms=0))
    assert got.roll_first and got.deleted == (0, 10, 20, 30)
    assert got.log_start_offset == 35  # the new active segment's base, the LEO


def test_an_empty_active_segment_never_goes() -> None:
    segments = log((0, 1000, 5000), (10, 0, 5000))
    got = run(RetentionPolicy(retention_ms=0), segments, hw=10, leo=10)
    assert (got.deleted, got.roll_first, got.log_start_offset) == ((0,), False, 10)


def test_without_delete_in_the_policy_only_the_start_offset_breach_deletes() -> None:
    compact = RetentionPolicy(retention_ms=0, retention_bytes=0, delete=False)
    assert run(compact).nothing
    # DeleteRecords moved the start offset to 21: segments 0-9 and 10-19 are wholly below it.
    got = run(compact, start=21)
    assert got.deleted == (0, 10) and got.log_start_offset == 21
    assert got.reasons == ("log start offset 21 breach",)


def test_after_delete_records_the_breached_segments_go_with_delete_in_the_policy_too() -> None:
    got = run(RetentionPolicy(retention_ms=-1), start=30)
    assert got.deleted == (0, 10, 20) and got.log_start_offset == 30


def test_the_passes_run_on_what_the_one_before_left() -> None:
    # Time takes segment 0; then 2,500 bytes against 1,000: 1,500 over, segment 10 goes too.
    got = run(RetentionPolicy(retention_ms=4500, retention_bytes=1000))
    assert got.deleted == (0, 10) and got.log_start_offset == 20
    assert got.reasons == ("retention time 4500 ms breach", "retention size 1000 bytes breach")


def test_deletable_stops_at_the_first_segment_that_stays() -> None:
    keep_second = {10}
    n = deletable(
        SEGMENTS, lambda s, _n: s.base_offset not in keep_second, high_watermark=35,
        log_end_offset=35,
    )  # fmt: skip
    assert n == 1


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[SegmentView], int, int, int]:
    """Segments (sizes, ages), a log start offset inside the first one or later, an HW <= LEO."""
    sizes = draw(st.lists(st.integers(1, 20), min_size=1, max_size=6))  # records per segment
    segments, base = [], 0
    for n in sizes:
        age = draw(st.integers(0, 10_000))
        segments.append(SegmentView(base, n * 100, NOW - age))
        base += n
    if draw(st.booleans()):
        segments.append(SegmentView(base, 0, NOW))  # an empty active segment
    hw = draw(st.integers(0, base))
    start = draw(st.integers(0, hw))
    return segments, start, hw, base


@given(
    logs(),
    st.integers(-1, 10_000),
    st.integers(-1, 3000),
    st.booleans(),
)
def test_retention_never_passes_the_hw_never_empties_the_log_never_moves_start_back(
    log_state: tuple[list[SegmentView], int, int, int], ms: int, size: int, delete: bool
) -> None:
    segments, start, hw, leo = log_state
    got = run(RetentionPolicy(ms, size, delete), segments, start=start, hw=hw, leo=leo)
    kept = [s for s in segments if s.base_offset not in got.deleted]
    # Deleted segments are the oldest ones, each wholly at or below the HW.
    assert list(got.deleted) == [s.base_offset for s in segments[: len(got.deleted)]]
    ends = [s.base_offset for s in segments[1:]] + [leo]
    assert all(end <= hw for end, _ in zip(ends, got.deleted, strict=False))
    # A log keeps a segment: one of its own, or the empty one it rolled.
    assert kept or got.roll_first
    assert got.log_start_offset >= start
    assert got.log_start_offset == max(start, kept[0].base_offset if kept else leo)
