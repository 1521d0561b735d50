"""The consumer's positions: records below the fetch offset are skipped, the position moves past
the last batch, stale answers are dropped, and each Fetch error code has its action."""

from __future__ import annotations

import pytest

from minibroker.client.fetch_state import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ErrorAction,
    OffsetReset,
    SubscriptionState,
    fetch_error_action,
    records_from,
    reset_timestamp,
)
from minibroker.core.control_records import Marker
from minibroker.core.errors import ErrorCode
from minibroker.core.records import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    NewRecord,
    RecordError,
    build_batch,
)
from minibroker.core.types import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def batch(base_offset: int, *values: bytes) -> bytes:
    return build_batch(
        [NewRecord(b"k", v) for v in values], base_timestamp=1000, base_offset=base_offset
    )


LOG = batch(0, b"a", b"b", b"c") + batch(3, b"d", b"e") + batch(5, b"f")


@pytest.mark.parametrize(
    ("fetch_offset", "offsets", "next_offset"),
    [
        (0, [0, 1, 2, 3, 4, 5], 6),
        (1, [1, 2, 3, 4, 5], 6),  # the first batch starts before the fetch offset
        (3, [3, 4, 5], 6),
        (4, [4, 5], 6),
        (6, [], None),  # every batch ends before it
    ],
)
def test_records_from_skips_what_precedes_the_fetch_offset(
    fetch_offset: int, offsets: list[int], next_offset: int | None
) -> None:
    records, nxt = records_from(LOG, fetch_offset)
    assert [r.offset for r in records] == offsets
    assert nxt == next_offset


def test_records_from_nothing() -> None:
    assert records_from(b"", 7) == ([], None)


def test_a_corrupt_batch_after_good_ones_waits_for_the_next_fetch() -> None:
    bad = bytearray(batch(3, b"d"))
    bad[-1] ^= 0xFF  # breaks the CRC
    records, nxt = records_from(batch(0, b"a") + bytes(bad), 0)
    assert [r.value for r in records] == [b"a"] and nxt == 1
    with pytest.raises(RecordError) as info:
        records_from(bytes(bad), 3)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def test_a_batch_whose_crc_is_right_but_whose_records_lie_costs_nothing_before_it() -> None:
    """A log damaged before brokers walked records (issue 15): the batch at offset 3 claims one
    record and holds two. Offsets 0-2 still read; the reader stops at 3 and says so there."""
    from tests.hostile import batches as hb

    liar = bytearray(hb.batch(hb.records(2), record_count=1))
    liar[:8] = (3).to_bytes(8, "big")  # base offset, outside the CRC
    data = batch(0, b"a", b"b", b"c") + bytes(liar) + batch(4, b"e")
    records, nxt = records_from(data, 0)
    assert [r.offset for r in records] == [0, 1, 2] and nxt == 3
    with pytest.raises(RecordError, match="batch at offset 3") as info:
        records_from(data[len(batch(0, b"a", b"b", b"c")) :], 3)
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def subs(*tps: TopicPartition) -> SubscriptionState:
    s = SubscriptionState("earliest")
    s.assign(tps)
    return s


def test_apply_fetched_returns_records_and_moves_the_position() -> None:
    s = subs(TP0)
    s.seek(TP0, 1)
    records = s.apply_fetched(TP0, 1, LOG, high_watermark=6, log_start_offset=0)
    assert [(r.offset, r.value, r.key) for r in records][:2] == [(1, b"b", b"k"), (2, b"c", b"k")]
    assert records[0].tp == TP0 and records[0].timestamp == 1000
    assert s.position(TP0) == 6
    assert s.state(TP0).high_watermark == 6
    assert s.apply_fetched(TP0, 6, b"", 6, 0) == [] and s.position(TP0) == 6


def test_an_answer_for_an_old_position_is_dropped() -> None:
    s = subs(TP0)
    s.seek(TP0, 0)
    s.seek(TP0, 4)  # the user seeks while a fetch at 0 is in flight
    assert s.apply_fetched(TP0, 0, LOG, 6, 0) == []
    assert s.position(TP0) == 4
    s.request_reset(TP0, "latest")
    assert s.apply_fetched(TP0, 4, LOG, 6, 0) == []
    assert s.apply_fetched(TP1, 0, LOG, 6, 0) == []  # not assigned


def test_positions_resets_and_fetchable_partitions() -> None:
    s = subs(TP0, TP1)
    assert s.needs_reset() == {TP0: "earliest", TP1: "earliest"}
    assert s.fetchable(0) == []
    s.seek(TP0, 3)
    s.request_reset(TP1, "latest")
    assert s.needs_reset() == {TP1: "latest"}
    assert s.fetchable(0) == [TP0]
    s.back_off(TP0, until_ms=50)
    assert s.fetchable(49) == [] and s.fetchable(50) == [TP0]
    assert s.next_backoff_end(10) == 50 and s.next_backoff_end(50) is None
    with pytest.raises(ValueError):
        s.seek(TP0, -1)
    with pytest.raises(ValueError):
        s.position(TopicPartition("u", 0))


def test_reassigning_keeps_positions_of_partitions_that_stay() -> None:
    s = subs(TP0, TP1)
    s.seek(TP0, 7)
    s.seek(TP1, 8)
    s.assign([TP1, TopicPartition("u", 0)])
    assert s.assigned() == [TP1, TopicPartition("u", 0)]
    assert s.position(TP1) == 8


def test_reset_timestamps() -> None:
    assert reset_timestamp("earliest") == EARLIEST_TIMESTAMP == -2
    assert reset_timestamp("latest") == LATEST_TIMESTAMP == -1
    with pytest.raises(ValueError):
        reset_timestamp("none")


@pytest.mark.parametrize(
    ("code", "reset", "action"),
    [
        (ErrorCode.OFFSET_OUT_OF_RANGE, "earliest", ErrorAction.RESET_OFFSET),
        (ErrorCode.OFFSET_OUT_OF_RANGE, "none", ErrorAction.RAISE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.FENCED_LEADER_EPOCH, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.LEADER_NOT_AVAILABLE, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.REPLICA_NOT_AVAILABLE, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.KAFKA_STORAGE_ERROR, "earliest", ErrorAction.REFRESH_METADATA),
        (ErrorCode.OFFSET_NOT_AVAILABLE, "earliest", ErrorAction.BACKOFF),
        (ErrorCode.REQUEST_TIMED_OUT, "earliest", ErrorAction.BACKOFF),
        (ErrorCode.CORRUPT_MESSAGE, "earliest", ErrorAction.RAISE),
        (ErrorCode.UNKNOWN_SERVER_ERROR, "earliest", ErrorAction.RAISE),
    ],
)
def test_fetch_error_actions(code: ErrorCode, reset: OffsetReset, action: ErrorAction) -> None:
    assert fetch_error_action(code, reset) is action


def txn_batch(base_offset: int, pid: int, *values: bytes) -> bytes:
    return build_batch(
        [NewRecord(b"k", v) for v in values], base_timestamp=1000, base_offset=base_offset,
        producer_id=pid, producer_epoch=0, base_sequence=base_offset,
        attributes=TRANSACTIONAL_FLAG,
    )  # fmt: skip


def marker(offset: int, pid: int, commit: bool) -> bytes:
    m = Marker(commit, 1)
    return build_batch(
        [(m.key(), m.value(), (), None)], base_timestamp=1000, base_offset=offset,
        producer_id=pid, producer_epoch=0, attributes=TRANSACTIONAL_FLAG | CONTROL_FLAG,
    )  # fmt: skip


# Producer 7 commits offsets 0-1 (marker 4), producer 8 aborts 2-3 (marker 5), then plain 6.
TXN_LOG = (
    txn_batch(0, 7, b"c0", b"c1") + txn_batch(2, 8, b"a2", b"a3") + marker(4, 7, True)
    + marker(5, 8, False) + batch(6, b"p6")
)  # fmt: skip


def test_read_committed_leaves_out_aborted_transactions_and_every_marker() -> None:
    """Kafka's Fetcher with isolation.level=read_committed (FetcherTest
    testReadCommittedWithCommittedAndAbortedTransactions): an aborted transaction's records
    are skipped from its first offset to its ABORT marker; markers are never records."""
    records, end = records_from(TXN_LOG, 0, aborted=[(8, 2)])
    assert [(r.offset, r.value) for r in records] == [(0, b"c0"), (1, b"c1"), (6, b"p6")]
    assert end == 7
    uncommitted, _ = records_from(TXN_LOG, 0)  # read_uncommitted: all data, no markers
    assert [r.value for r in uncommitted] == [b"c0", b"c1", b"a2", b"a3", b"p6"]


def test_an_abort_marker_ends_the_producers_aborted_range() -> None:
    later = txn_batch(7, 8, b"n7") + marker(8, 8, True)
    records, _ = records_from(TXN_LOG + later, 0, aborted=[(8, 2)])
    assert [r.value for r in records] == [b"c0", b"c1", b"p6", b"n7"]
