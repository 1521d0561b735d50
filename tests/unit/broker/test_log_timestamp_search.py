"""ListOffsets by timestamp on the log, as Kafka 2.6 finds it (core/src/main/scala/kafka/log/
Log.scala fetchOffsetByTimestamp, LogSegment.scala findOffsetByTimestamp, clients' FileRecords
searchForTimestamp): the first *record* whose timestamp reaches the target, at or after the log
start offset, with its own timestamp and its batch's leader epoch. Cases from LogSegmentTest
testFindOffsetByTimestamp and LogTest testFetchOffsetByTimestampIncludesLeaderEpoch."""

from __future__ import annotations

import pytest

from broker.log.log import Log
from broker.log.store import MemorySegmentStore, SegmentStore
from broker.log.timestamp_search import TimestampAndOffset
from minibroker.core import records
from minibroker.core.batch_validation import TIMESTAMP_TYPE_FLAG
from minibroker.core.records import NewRecord


def batch(*timestamps: int) -> bytes:
    """One batch whose records carry these timestamps, in this order."""
    return records.build_batch(
        [NewRecord(None, b"v%d" % i, (), ts) for i, ts in enumerate(timestamps)],
        base_timestamp=min(timestamps),
    )


def log_of(
    store: SegmentStore,
    *batches: tuple[int, ...],
    epoch: int = 0,
    segment_bytes: int = 1 << 30,
    index_interval_bytes: int = 4096,
) -> Log:
    log = Log(store, segment_bytes=segment_bytes, index_interval_bytes=index_interval_bytes)
    for timestamps in batches:
        log.append_as_leader(batch(*timestamps), leader_epoch=epoch)
    return log


def offset_for(log: Log, timestamp: int) -> int | None:
    found = log.fetch_offset_by_timestamp(timestamp)
    return None if found is None else found.offset


def test_the_record_not_its_batch_answers_a_timestamp_inside_a_batch(store: SegmentStore) -> None:
    """Issue 38: two records in one batch, 1234 and 999999999999; asking for the second's
    timestamp finds offset 1 (the batch's first offset, 0, holds an older record)."""
    log = log_of(store, (1234, 999_999_999_999), epoch=3)
    assert log.fetch_offset_by_timestamp(999_999_999_999) == TimestampAndOffset(
        999_999_999_999, 1, 3
    )
    assert log.fetch_offset_by_timestamp(1235) == TimestampAndOffset(999_999_999_999, 1, 3)
    assert log.fetch_offset_by_timestamp(1234) == TimestampAndOffset(1234, 0, 3)
    assert log.fetch_offset_by_timestamp(0) == TimestampAndOffset(1234, 0, 3)
    assert log.fetch_offset_by_timestamp(1_000_000_000_000) is None


def test_records_out_of_order_within_a_batch_give_the_first_that_reaches_the_target(
    store: SegmentStore,
) -> None:
    log = log_of(store, (500, 100, 300, 700))
    assert offset_for(log, 200) == 0  # 500 is the first record at or after 200
    assert offset_for(log, 600) == 3
    assert offset_for(log, 701) is None


@pytest.mark.parametrize(
    ("target", "offset"),
    [(420, 42), (421, 43), (430, 43), (431, 44), (491, None), (401, 41), (399, 40), (0, 0), (5, 1)],
)
def test_one_record_a_batch_over_several_segments(target: int, offset: int | None) -> None:
    """LogSegmentTest.testFindOffsetByTimestamp's table (offsets 40..49 at timestamps 400..490),
    here from offset 0 with ten earlier records at timestamps 0..90 and small segments, so the
    search picks a segment and skips batches through the index."""
    log = log_of(
        MemorySegmentStore(),
        *[(i * 10,) for i in range(50)],
        segment_bytes=400,
        index_interval_bytes=1,
    )
    assert len(log.segment_base_offsets()) > 3
    assert offset_for(log, target) == offset


def test_each_answer_carries_its_batchs_leader_epoch(store: SegmentStore) -> None:
    """LogTest.testFetchOffsetByTimestampIncludesLeaderEpoch."""
    log = Log(store)
    assert log.fetch_offset_by_timestamp(0) is None
    log.append_as_leader(batch(1000), leader_epoch=0)
    log.append_as_leader(batch(1001), leader_epoch=1)
    assert log.fetch_offset_by_timestamp(1000) == TimestampAndOffset(1000, 0, 0)
    assert log.fetch_offset_by_timestamp(1001) == TimestampAndOffset(1001, 1, 1)


def test_records_below_the_log_start_offset_are_not_answers(store: SegmentStore) -> None:
    log = log_of(store, (100, 900, 200, 950))
    log.append_as_leader(batch(300), leader_epoch=0)
    assert log.maybe_increment_log_start_offset(2, high_watermark=5)
    assert offset_for(log, 100) == 2  # 100 (offset 0) is gone: 200 is the first left
    assert offset_for(log, 800) == 3  # 900 (offset 1) is gone: 950 at offset 3


def test_log_append_time_gives_every_record_the_batchs_timestamp(store: SegmentStore) -> None:
    """DefaultRecordBatch: with LogAppendTime each record's timestamp is the batch's max
    timestamp, whatever the record holds; so the batch's first record answers."""
    log = Log(store)
    appended = records.build_batch(
        [NewRecord(None, b"a", (), 10), NewRecord(None, b"b", (), 20)],
        base_timestamp=10,
        partition_leader_epoch=0,
        attributes=TIMESTAMP_TYPE_FLAG,
    )
    log.append_as_follower(appended)
    assert log.fetch_offset_by_timestamp(15) == TimestampAndOffset(20, 0, 0)
