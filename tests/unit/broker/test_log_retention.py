"""The log start offset and retention on a real Log (memory store): Kafka 2.6's LogTest cases
shouldDeleteTimeBasedSegmentsReadyToBeDeleted, shouldDeleteSizeBasedSegments,
testLogDeletionAfterDeleteRecords, testTimeBasedLogRoll, testLogStartOffsetCheckpoint's
reload, and the start offset's effect on reads, truncation, epochs and producers."""

from __future__ import annotations

import pytest

from broker.log.log import Log
from broker.log.log_types import OffsetOutOfRange
from broker.log.retention import RetentionPolicy, decide
from broker.log.store import DELETED_SUFFIX, MemorySegmentStore
from minibroker.core import records
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, RecordError

T0 = 1_700_000_000_000
HOUR = 3_600_000


def batch(value: bytes, ts: int, *, producer_id: int = -1, seq: int = -1) -> bytes:
    return records.build_batch(
        [NewRecord(None, value)],
        base_timestamp=ts,
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=seq,
    )


def log_with_segments(store: MemorySegmentStore, timestamps: list[int]) -> Log:
    """One one-record segment per timestamp (segment.bytes fits one batch)."""
    log = Log(store, segment_bytes=len(batch(b"v0", T0)))
    for i, ts in enumerate(timestamps):
        log.append_as_leader(batch(b"v%d" % i, ts), leader_epoch=0)
    return log


def apply(log: Log, policy: RetentionPolicy, now_ms: int, hw: int) -> list[str]:
    """What LogManager does with a decision (broker/log_manager.py), without the broker."""
    decision = decide(
        log.retention_views(),
        policy,
        now_ms=now_ms,
        log_start_offset=log.log_start_offset,
        high_watermark=hw,
        log_end_offset=log.log_end_offset,
    )
    if decision.nothing:
        return []
    if decision.roll_first:
        log.roll()
    retired = log.retire_oldest(len(decision.deleted))
    log.maybe_increment_log_start_offset(log.segment_base_offsets()[0], hw)
    return retired


def test_time_based_retention_deletes_old_segments_and_moves_the_log_start() -> None:
    store = MemorySegmentStore()
    log = log_with_segments(store, [T0, T0 + 1, T0 + 2 * HOUR, T0 + 3 * HOUR])
    retired = apply(log, RetentionPolicy(retention_ms=HOUR), now_ms=T0 + 3 * HOUR, hw=4)
    assert log.segment_base_offsets() == [2, 3]
    assert log.log_start_offset == 2
    assert sorted(retired) == sorted(
        f"{b:020d}{suffix}{DELETED_SUFFIX}" for b in (0, 1) for suffix in (".log", ".index")
    )
    # Renamed, not yet gone (file.delete.delay.ms); then removed off the loop.
    assert all(name in store.list() for name in retired)
    log.unlink_retired(retired)
    assert not any(name.endswith(DELETED_SUFFIX) for name in store.list())
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 1 << 20)
    assert records.decode_records(log.read(2, 1 << 20))[0].offset == 2


def test_size_based_retention_keeps_the_log_within_retention_bytes() -> None:
    log = log_with_segments(MemorySegmentStore(), [T0] * 5)
    one = log.size_bytes // 5
    apply(log, RetentionPolicy(retention_ms=-1, retention_bytes=2 * one), now_ms=T0, hw=5)
    assert log.segment_base_offsets() == [3, 4]


def test_nothing_at_or_past_the_high_watermark_is_deleted() -> None:
    log = log_with_segments(MemorySegmentStore(), [T0] * 4)
    apply(log, RetentionPolicy(retention_ms=0), now_ms=T0 + HOUR, hw=2)
    assert log.segment_base_offsets() == [2, 3]
    assert log.log_start_offset == 2


def test_when_every_segment_would_go_the_log_rolls_first() -> None:
    log = log_with_segments(MemorySegmentStore(), [T0] * 3)
    apply(log, RetentionPolicy(retention_ms=0), now_ms=T0 + HOUR, hw=3)
    assert log.segment_base_offsets() == [3]
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes) == (3, 3, 0)
    log.append_as_leader(batch(b"v3", T0 + HOUR), leader_epoch=0)
    assert log.log_end_offset == 4


def test_delete_records_moves_the_start_and_retention_deletes_the_breached_segments() -> None:
    """LogTest.testLogDeletionAfterDeleteRecords, with the delete policy off."""
    log = log_with_segments(MemorySegmentStore(), [T0] * 4)
    assert log.maybe_increment_log_start_offset(2, high_watermark=4)
    assert log.segment_base_offsets() == [0, 1, 2, 3]  # the start moved, no file yet
    with pytest.raises(OffsetOutOfRange):
        log.read(1, 1 << 20)
    apply(log, RetentionPolicy(delete=False), now_ms=T0, hw=4)
    assert log.segment_base_offsets() == [2, 3]


def test_the_start_never_passes_the_high_watermark_nor_moves_back() -> None:
    log = log_with_segments(MemorySegmentStore(), [T0] * 3)
    with pytest.raises(OffsetOutOfRange):
        log.maybe_increment_log_start_offset(3, high_watermark=2)
    assert log.maybe_increment_log_start_offset(2, high_watermark=2)
    assert not log.maybe_increment_log_start_offset(1, high_watermark=2)
    assert log.log_start_offset == 2


def test_a_start_inside_a_segment_reads_from_the_batch_holding_it() -> None:
    log = Log(MemorySegmentStore())
    log.append_as_leader(
        records.build_batch([NewRecord(None, b"a"), NewRecord(None, b"b")], base_timestamp=T0),
        leader_epoch=0,
    )
    log.maybe_increment_log_start_offset(1, high_watermark=2)
    got = [r.offset for r in records.decode_records(log.read(1, 1 << 20))]
    assert got == [0, 1]  # the whole batch, as Kafka; the consumer skips offset 0


def test_the_checkpointed_start_is_taken_at_reopen() -> None:
    store = MemorySegmentStore()
    log = log_with_segments(store, [T0] * 3)
    log.flush()
    reopened = Log(store, log_start_offset=2)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (2, 3)
    assert Log(store, log_start_offset=0).log_start_offset == 0


def test_a_log_ending_below_the_checkpointed_start_is_emptied_and_starts_there() -> None:
    """Kafka's loadSegments: segment files removed behind the broker's back."""
    store = MemorySegmentStore()
    log_with_segments(store, [T0] * 2).flush()
    reopened = Log(store, log_start_offset=7)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (7, 7)
    assert reopened.segment_base_offsets() == [7]
    assert any("below the checkpointed log start offset 7" in r for r in reopened.repairs)


def test_recovery_removes_files_renamed_for_deletion() -> None:
    store = MemorySegmentStore()
    log = log_with_segments(store, [T0, T0 + 2 * HOUR])
    retired = apply(log, RetentionPolicy(retention_ms=HOUR), now_ms=T0 + 2 * HOUR, hw=2)
    assert retired and all(n in store.list() for n in retired)
    log.flush()
    Log(store, log_start_offset=1)  # the broker stopped before file.delete.delay.ms
    assert not any(n.endswith(DELETED_SUFFIX) for n in store.list())


def test_truncation_below_the_start_lowers_it() -> None:
    """Kafka's truncateTo: logStartOffset = min(target, logStartOffset)."""
    log = log_with_segments(MemorySegmentStore(), [T0] * 4)
    log.maybe_increment_log_start_offset(3, high_watermark=4)
    log.truncate_to(2)
    assert (log.log_start_offset, log.log_end_offset) == (2, 2)


def test_the_epoch_cache_forgets_epochs_before_the_start() -> None:
    """LeaderEpochFileCache.truncateFromStart: the last epoch before it starts there."""
    log = Log(MemorySegmentStore())
    for epoch in (1, 2, 3):
        log.append_as_leader(batch(b"e", T0), leader_epoch=epoch)
        log.append_as_leader(batch(b"f", T0), leader_epoch=epoch)
    log.maybe_increment_log_start_offset(3, high_watermark=6)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(2, 3), (3, 4)]


def test_a_producer_whose_batches_were_deleted_is_remembered_while_its_snapshot_lasts() -> None:
    """Kafka 2.6: ProducerStateManager.truncateHead keeps the producer in memory, and the
    snapshot written at the roll keeps it across a restart; a log with no snapshot of it
    knows no state and takes any sequence (KIP-360's unknown producer)."""
    store = MemorySegmentStore()
    log = Log(store, segment_bytes=len(batch(b"a", T0, producer_id=7, seq=0)))
    log.append_as_leader(batch(b"a", T0, producer_id=7, seq=0), leader_epoch=0)
    log.append_as_leader(batch(b"c", T0), leader_epoch=0)  # rolls: 00..01.snapshot
    log.maybe_increment_log_start_offset(1, high_watermark=2)
    apply(log, RetentionPolicy(delete=False), now_ms=T0, hw=2)
    assert log.segment_base_offsets() == [1]
    with pytest.raises(RecordError) as refused:
        log.append_as_leader(batch(b"b", T0, producer_id=7, seq=5), leader_epoch=0)
    assert refused.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.flush()
    with pytest.raises(RecordError):
        Log(store, log_start_offset=1).append_as_leader(
            batch(b"b", T0, producer_id=7, seq=5), leader_epoch=0
        )
    store.delete(f"{1:020d}.snapshot")
    reopened = Log(store, log_start_offset=1)
    info = reopened.append_as_leader(batch(b"d", T0, producer_id=7, seq=5), leader_epoch=0)
    assert info.first_offset == 2


def test_segment_ms_rolls_by_the_batches_timestamps() -> None:
    """LogTest.testTimeBasedLogRoll: the first batch's timestamp starts the clock."""
    log = Log(MemorySegmentStore(), segment_ms=HOUR)
    log.append_as_leader(batch(b"a", T0), leader_epoch=0)
    log.append_as_leader(batch(b"b", T0 + HOUR), leader_epoch=0)  # not past segment.ms
    assert log.segment_base_offsets() == [0]
    log.append_as_leader(batch(b"c", T0 + HOUR + 1), leader_epoch=0)
    assert log.segment_base_offsets() == [0, 2]


def test_segment_ms_counts_from_creation_when_batches_carry_no_timestamps() -> None:
    now = [T0]
    log = Log(MemorySegmentStore(), segment_ms=HOUR, clock=lambda: now[0])
    log.append_as_leader(batch(b"a", -1), leader_epoch=0)
    now[0] += HOUR + 1
    log.append_as_leader(batch(b"b", -1), leader_epoch=0)
    assert log.segment_base_offsets() == [0, 1]


def test_a_segment_without_timestamps_is_as_old_as_its_file() -> None:
    now = [T0]
    store = MemorySegmentStore(clock=lambda: now[0])
    log = Log(store, segment_bytes=len(batch(b"a", -1)), clock=lambda: now[0])
    log.append_as_leader(batch(b"a", -1), leader_epoch=0)
    now[0] += 2 * HOUR
    log.append_as_leader(batch(b"b", -1), leader_epoch=0)
    apply(log, RetentionPolicy(retention_ms=HOUR), now_ms=now[0], hw=2)
    assert log.segment_base_offsets() == [1]


def test_recovered_segments_keep_their_largest_timestamp() -> None:
    store = MemorySegmentStore()
    log_with_segments(store, [T0, T0 + 5, T0 + 2 * HOUR]).flush()
    reopened = Log(store)
    assert [v.largest_timestamp_ms for v in reopened.retention_views()] == [
        T0,
        T0 + 5,
        T0 + 2 * HOUR,
    ]


def test_a_follower_appends_a_fetch_larger_than_a_segment_across_segments() -> None:
    """Small segments must replicate: the fetched batches go in runs that each fit a segment
    (Kafka 2.6 would refuse the answer; a test bed's small segments must not stall followers)."""
    one = batch(b"v0", T0)
    leader = Log(MemorySegmentStore())
    for i in range(5):
        leader.append_as_leader(batch(b"v%d" % i, T0), leader_epoch=0)
    follower = Log(MemorySegmentStore(), segment_bytes=2 * len(one))
    info = follower.append_as_follower(leader.read(0, 1 << 20))
    assert (info.first_offset, info.last_offset, info.batch_count) == (0, 4, 5)
    assert follower.segment_base_offsets() == [0, 2, 4]
    assert follower.read(0, 1 << 20) == leader.read(0, 1 << 20)
    tiny = Log(MemorySegmentStore(), segment_bytes=len(one) - 1)
    with pytest.raises(RecordError):
        tiny.append_as_follower(leader.read(0, 1 << 20))
    assert tiny.log_end_offset == 0
