"""Idempotent producers' sequence checks (Kafka 2.6's ProducerStateManager rules), through a
partition's Log on an in-memory store: duplicates answered with the first append's offsets and
never appended twice, gaps and fenced epochs refused with Kafka's codes and nothing written,
and the state followed by followers, rebuilt from the log and cut back by truncation."""

from __future__ import annotations

import pytest

from broker.log.log import Log
from broker.log.producer_state import INT32_MAX, in_sequence, last_sequence
from broker.log.store import MemorySegmentStore
from minibroker.core import records
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, RecordError

PID = 4000


def pbatch(seq: int, n: int = 2, *, pid: int = PID, epoch: int = 0, base_offset: int = 0) -> bytes:
    """A producer's batch of `n` records starting at sequence `seq`."""
    return records.build_batch(
        [NewRecord(None, b"s%d" % (seq + i)) for i in range(n)],
        base_timestamp=1_700_000_000_000,
        base_offset=base_offset,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )


@pytest.fixture
def log() -> Log:
    return Log(MemorySegmentStore())


def test_in_order_batches_append_and_a_retry_gets_the_first_appends_offsets(log: Log) -> None:
    first = log.append_as_leader(pbatch(0), leader_epoch=0)
    log.append_as_leader(pbatch(2), leader_epoch=0)
    retry = log.append_as_leader(pbatch(0), leader_epoch=0)
    assert (retry.first_offset, retry.last_offset) == (first.first_offset, first.last_offset)
    assert retry.batch_count == 0
    assert log.log_end_offset == 4  # nothing appended twice


def test_a_gap_in_sequence_is_refused_and_writes_nothing(log: Log) -> None:
    log.append_as_leader(pbatch(0), leader_epoch=0)
    with pytest.raises(RecordError) as refused:
        log.append_as_leader(pbatch(5), leader_epoch=0)
    assert refused.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log.log_end_offset == 2


def test_epochs_fence_older_producers_and_a_new_epoch_starts_at_zero(log: Log) -> None:
    log.append_as_leader(pbatch(0, epoch=1), leader_epoch=0)
    with pytest.raises(RecordError) as fenced:
        log.append_as_leader(pbatch(2, epoch=0), leader_epoch=0)
    assert fenced.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    with pytest.raises(RecordError) as bad_start:
        log.append_as_leader(pbatch(2, epoch=2), leader_epoch=0)
    assert bad_start.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.append_as_leader(pbatch(0, epoch=2), leader_epoch=0)
    assert log.log_end_offset == 4


def test_an_unknown_producer_may_start_anywhere_and_others_are_not_checked(log: Log) -> None:
    log.append_as_leader(pbatch(77), leader_epoch=0)
    plain = records.build_batch([NewRecord(None, b"x")], base_timestamp=1)
    log.append_as_leader(plain, leader_epoch=0)
    log.append_as_leader(plain, leader_epoch=0)  # no producer id: appended every time
    assert log.log_end_offset == 4


def test_only_the_last_five_batches_are_remembered(log: Log) -> None:
    for seq in range(0, 12, 2):
        log.append_as_leader(pbatch(seq), leader_epoch=0)
    assert log.append_as_leader(pbatch(2), leader_epoch=0).batch_count == 0  # 5th from last
    with pytest.raises(RecordError) as too_old:
        log.append_as_leader(pbatch(0), leader_epoch=0)
    assert too_old.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_follower_that_becomes_leader_knows_the_batches_it_replicated() -> None:
    leader, follower = Log(MemorySegmentStore()), Log(MemorySegmentStore())
    for log in (leader, follower):  # the same first batch: the follower's state is read now
        log.append_as_leader(pbatch(0, pid=9), leader_epoch=0)
    for seq in (0, 2):  # then kept up to date by replication
        info = leader.append_as_leader(pbatch(seq), leader_epoch=0)
        follower.append_as_follower(leader.read(info.first_offset, 1 << 20))
    retry = follower.append_as_leader(pbatch(2), leader_epoch=1)
    assert (retry.batch_count, retry.first_offset) == (0, 4)
    follower.append_as_leader(pbatch(4), leader_epoch=1)
    assert follower.log_end_offset == 8


def test_a_reopened_log_reads_its_producers_from_the_batches() -> None:
    store = MemorySegmentStore()
    log = Log(store, segment_bytes=200)  # several segments
    for seq in range(0, 10, 2):
        log.append_as_leader(pbatch(seq), leader_epoch=0)
    assert len(log.segment_base_offsets()) > 1
    reopened = Log(store, segment_bytes=200)
    assert reopened.append_as_leader(pbatch(8), leader_epoch=0).first_offset == 8
    with pytest.raises(RecordError):
        reopened.append_as_leader(pbatch(20), leader_epoch=0)
    reopened.append_as_leader(pbatch(10), leader_epoch=0)
    assert reopened.log_end_offset == 12


def test_truncation_forgets_the_batches_it_removes(log: Log) -> None:
    for seq in (0, 2, 4):
        log.append_as_leader(pbatch(seq), leader_epoch=0)
    log.truncate_to(4)
    again = log.append_as_leader(pbatch(4), leader_epoch=0)  # no longer a duplicate
    assert (again.batch_count, again.first_offset) == (1, 4)
    log.truncate_to(0)
    log.append_as_leader(pbatch(30), leader_epoch=0)  # the producer is forgotten
    assert log.log_end_offset == 2


def test_sequences_wrap_after_int32_max() -> None:
    assert last_sequence(INT32_MAX - 1, 3) == 1
    assert last_sequence(5, 3) == 8
    assert in_sequence(INT32_MAX, 0) and in_sequence(4, 5)
    assert not in_sequence(4, 6)
