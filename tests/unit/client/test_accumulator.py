"""The producer's batching decisions: when a batch is full, lingered, backing off or expired,
and what a Produce error code means. Time is an argument; a batch's outcome is a plain string."""

from __future__ import annotations

import itertools

import pytest

from minibroker.client.accumulator import (
    MAX_RECORD_OVERHEAD,
    Outcome,
    ProducerBatch,
    RecordAccumulator,
    produce_outcome,
    record_size_upper_bound,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.records import HEADER_SIZE, NewRecord, decode_records, iter_batches
from minibroker.core.types import TopicPartition

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def acc(batch_size: int = 1000, linger_ms: int = 5) -> RecordAccumulator[str]:
    return RecordAccumulator(
        batch_size=batch_size,
        linger_ms=linger_ms,
        retry_backoff_ms=100,
        new_outcome=lambda tp: f"outcome of {tp}",
    )


def add(a: RecordAccumulator[str], tp: TopicPartition, value: bytes, now_ms: int) -> bool:
    """Append; whether the sender has something new to decide."""
    size = record_size_upper_bound(None, value)
    batch = a.append(tp, NewRecord(None, value, timestamp=1000), size, now_ms)
    assert batch.records[-1][1] == value  # the record is the batch's last
    return RecordAccumulator.has_news(batch)


def values(batch: ProducerBatch[str]) -> list[str]:
    return [bytes(r[1] or b"").decode() for r in batch.records]


def test_record_size_is_an_upper_bound_of_the_encoded_size() -> None:
    for n in (0, 1, 100, 10_000):
        value = b"x" * n
        size = record_size_upper_bound(b"key", value, [("h", b"v")])
        a = acc(batch_size=10**6)
        a.append(TP0, NewRecord(b"key", value, (("h", b"v"),), timestamp=5), size, 0)
        (batch,) = a.drain([TP0], 10**6)
        assert len(batch.build()) - HEADER_SIZE <= size
    assert record_size_upper_bound(None, None) == MAX_RECORD_OVERHEAD


def test_a_batch_waits_for_linger_then_is_ready() -> None:
    a = acc(linger_ms=5)
    assert add(a, TP0, b"a", now_ms=100)  # a new batch: the sender must look
    assert not add(a, TP0, b"b", now_ms=101)  # same batch, not full: nothing new to decide
    check = a.ready(102, in_flight=())
    assert check.ready == [] and check.next_check_ms == 3
    assert a.ready(105, in_flight=()).ready == [TP0]


def test_a_full_batch_is_ready_at_once_and_the_next_record_opens_a_new_one() -> None:
    a = acc(batch_size=HEADER_SIZE + 2 * record_size_upper_bound(None, b"a"), linger_ms=1000)
    add(a, TP0, b"a", 0)
    assert add(a, TP0, b"b", 0)  # filled up
    assert a.ready(0, in_flight=()).ready == [TP0]
    assert a.starts_new_batch(TP0, record_size_upper_bound(None, b"c"))
    add(a, TP0, b"c", 0)
    (first,) = a.drain([TP0], 10**6)
    assert values(first) == ["a", "b"]
    assert [r.value for r in decode_records(first.build())] == [b"a", b"b"]
    assert a.ready(1, in_flight=()).ready == []  # "c" lingers in its own batch


def test_records_of_one_batch_share_its_outcome_and_a_new_batch_gets_its_own() -> None:
    made = itertools.count()
    size = record_size_upper_bound(None, b"a")
    a: RecordAccumulator[int] = RecordAccumulator(
        batch_size=HEADER_SIZE + 2 * size,
        linger_ms=1000,
        retry_backoff_ms=100,
        new_outcome=lambda tp: next(made),
    )
    first = a.append(TP0, NewRecord(None, b"a", timestamp=1), size, 0)
    same = a.append(TP0, NewRecord(None, b"b", timestamp=1), size, 0)
    other = a.append(TP0, NewRecord(None, b"c", timestamp=1), size, 0)
    assert first is same and len(first.records) == 2
    assert (first.outcome, other.outcome) == (0, 1)


def test_a_record_larger_than_batch_size_gets_a_batch_of_its_own() -> None:
    a = acc(batch_size=100, linger_ms=1000)
    add(a, TP0, b"small", 0)
    add(a, TP0, b"x" * 500, 0)
    add(a, TP0, b"after", 0)
    sizes = [len(b.records) for b in a.queued()]
    assert sizes == [1, 1, 1]


def test_flush_and_close_make_lingering_batches_ready() -> None:
    a = acc(linger_ms=10_000)
    add(a, TP0, b"a", 0)
    assert a.ready(1, in_flight=()).ready == []
    a.begin_flush()
    assert a.ready(1, in_flight=()).ready == [TP0]
    a.end_flush()
    assert a.ready(1, in_flight=()).ready == []
    a.begin_close()
    assert a.ready(1, in_flight=()).ready == [TP0]


def test_a_partition_with_a_batch_in_flight_waits() -> None:
    a = acc(linger_ms=0)
    add(a, TP0, b"a", 0)
    add(a, TP1, b"b", 0)
    check = a.ready(0, in_flight={TP0})
    assert check.ready == [TP1] and check.next_check_ms is None


def test_drain_takes_one_batch_per_partition_up_to_max_request_size() -> None:
    a = acc(batch_size=100, linger_ms=0)
    for tp in (TP0, TP1):
        add(a, tp, b"x" * 60, 0)
        add(a, tp, b"y" * 60, 0)
    one = a.drain([TP0, TP1], max_request_size=150)
    assert [(b.tp, values(b)) for b in one] == [(TP0, ["x" * 60])]
    two = a.drain([TP0, TP1], max_request_size=10**6)
    assert [(b.tp, values(b)) for b in two] == [(TP0, ["y" * 60]), (TP1, ["x" * 60])]


def test_a_retried_batch_goes_back_first_with_the_same_bytes_after_the_backoff() -> None:
    a = acc(linger_ms=0)
    add(a, TP0, b"a", 0)
    (batch,) = a.drain([TP0], 10**6)
    payload = batch.build()
    batch.attempts = 1
    add(a, TP0, b"b", 10)
    a.reenqueue(batch, now_ms=20)
    check = a.ready(50, in_flight=())
    assert check.ready == [] and check.next_check_ms == 70
    assert a.ready(120, in_flight=()).ready == [TP0]
    again = a.drain([TP0], 10**6)[0]
    assert again is batch and again.build() is payload
    assert not a.starts_new_batch(TP0, 1)  # "b" still has room; the retried batch takes none


def test_expire_removes_batches_past_delivery_timeout_from_the_head() -> None:
    a = acc(batch_size=30, linger_ms=0)
    add(a, TP0, b"a" * 20, 0)
    add(a, TP0, b"b" * 20, 50)
    assert a.expire(99, delivery_timeout_ms=100) == []
    expired = a.expire(100, delivery_timeout_ms=100)
    assert [values(b) for b in expired] == [["a" * 20]]
    assert [values(b) for b in a.queued()] == [["b" * 20]]


def test_buffered_bytes_follow_appends_and_completions() -> None:
    a = acc(linger_ms=0)
    add(a, TP0, b"abc", 0)
    assert a.buffered_bytes == record_size_upper_bound(None, b"abc")
    (batch,) = a.drain([TP0], 10**6)
    a.release(batch)
    assert a.buffered_bytes == 0 and batch.completed
    with pytest.raises(AssertionError):
        a.release(batch)


def test_one_batch_per_partition_holds_all_its_records_in_v2_format() -> None:
    a = acc(batch_size=10**6, linger_ms=0)
    for v in (b"1", b"2", b"3"):
        add(a, TP0, v, 0)
    (batch,) = a.drain([TP0], 10**6)
    (header,) = iter_batches(batch.build(), verify_crc=True)
    assert header.record_count == 3 and header.base_timestamp == 1000


@pytest.mark.parametrize(
    ("code", "outcome"),
    [
        (ErrorCode.NONE, Outcome.DONE),
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, Outcome.REFRESH_AND_RETRY),
        (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, Outcome.REFRESH_AND_RETRY),
        (ErrorCode.LEADER_NOT_AVAILABLE, Outcome.REFRESH_AND_RETRY),
        (ErrorCode.FENCED_LEADER_EPOCH, Outcome.REFRESH_AND_RETRY),
        (ErrorCode.UNKNOWN_LEADER_EPOCH, Outcome.REFRESH_AND_RETRY),
        (ErrorCode.REQUEST_TIMED_OUT, Outcome.RETRY),
        (ErrorCode.NOT_ENOUGH_REPLICAS, Outcome.RETRY),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, Outcome.RETRY),
        (ErrorCode.NETWORK_EXCEPTION, Outcome.RETRY),
        (ErrorCode.KAFKA_STORAGE_ERROR, Outcome.RETRY),
        (ErrorCode.CORRUPT_MESSAGE, Outcome.FAIL),
        (ErrorCode.MESSAGE_TOO_LARGE, Outcome.FAIL),
        (ErrorCode.RECORD_LIST_TOO_LARGE, Outcome.FAIL),
        (ErrorCode.INVALID_REQUIRED_ACKS, Outcome.FAIL),
        (ErrorCode.INVALID_RECORD, Outcome.FAIL),
        (ErrorCode.UNKNOWN_SERVER_ERROR, Outcome.FAIL),
    ],
)
def test_produce_outcome_of_each_code(code: ErrorCode, outcome: Outcome) -> None:
    assert produce_outcome(code) is outcome
