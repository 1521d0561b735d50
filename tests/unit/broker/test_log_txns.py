"""A log's transactions: markers, the `.txnindex` files, the LSO and a read_committed fetch's
aborted list, after Kafka 2.6's LogTest (testTransactionIndexUpdated,
testLastStableOffsetWithMixedProducerData, testAbortedTransactionSpanningMultipleSegments,
testFullTransactionIndexRecovery, testTransactionIndexUpdatedThroughReplication,
testZombieCoordinatorFenced, testEndTxnWithFencedProducerEpoch, testRebuildTransactionalState)."""

from __future__ import annotations

import time

import pytest

from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from broker.log.txn_index import AbortedTxn, decode
from minibroker.core.control_records import Marker
from minibroker.core.errors import ErrorCode
from minibroker.core.records import (
    TRANSACTIONAL_FLAG,
    NewRecord,
    RecordError,
    build_batch,
    iter_batches,
)

T0 = int(time.time() * 1000)  # markers carry the wall clock: no roll by segment.ms


class Producer:
    """A transactional producer's batches, its sequence going on from batch to batch."""

    def __init__(self, pid: int, epoch: int = 0) -> None:
        self.pid, self.epoch, self.seq = pid, epoch, 0

    def batch(self, n: int) -> bytes:
        data = build_batch(
            [NewRecord(None, b"v%d" % i) for i in range(n)], base_timestamp=T0,
            producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
            attributes=TRANSACTIONAL_FLAG,
        )  # fmt: skip
        self.seq += n
        return data


def plain(n: int) -> bytes:
    return build_batch([NewRecord(None, b"p")] * n, base_timestamp=T0)


def append(log: Log, data: bytes) -> None:
    log.append_as_leader(data, 0, transactional=True)


def end(log: Log, p: Producer, commit: bool, coordinator_epoch: int = 0) -> int:
    return log.append_marker(p.pid, p.epoch, Marker(commit, coordinator_epoch), 0).last_offset


def all_aborted(log: Log) -> list[AbortedTxn]:
    return [e for base in log.segment_base_offsets() for e in log._aborted.get(base, [])]


def build_mixed(log: Log) -> list[Producer]:
    """testTransactionIndexUpdated's log: four producers, plain data between, 90 offsets."""
    p1, p2, p3, p4 = (Producer(i) for i in (1, 2, 3, 4))
    append(log, p1.batch(5))  # 5
    append(log, plain(3))  # 8
    append(log, p2.batch(2))  # 10
    append(log, p1.batch(4))  # 14
    append(log, p3.batch(3))  # 17
    append(log, plain(2))  # 19
    append(log, p1.batch(10))  # 29
    end(log, p1, commit=False)  # 30
    append(log, p2.batch(6))  # 36
    append(log, p4.batch(3))  # 39
    append(log, plain(10))  # 49
    append(log, p3.batch(9))  # 58
    end(log, p3, commit=True)  # 59
    append(log, p4.batch(8))  # 67
    append(log, p2.batch(7))  # 74
    end(log, p2, commit=False)  # 75
    append(log, plain(10))  # 85
    append(log, p4.batch(4))  # 89
    end(log, p4, commit=True)  # 90
    return [p1, p2, p3, p4]


def test_transaction_index_updated() -> None:
    log = Log(MemorySegmentStore())
    build_mixed(log)
    expected = [AbortedTxn(1, 0, 29, 8), AbortedTxn(2, 8, 74, 36)]
    assert all_aborted(log) == expected
    assert decode(log.store.read("00000000000000000000.txnindex", 0, 68)) == expected
    assert log.last_stable_offset(30) == 8
    assert log.last_stable_offset(75) == 36
    assert log.last_stable_offset(log.log_end_offset) == log.log_end_offset


def test_last_stable_offset_with_mixed_producer_data() -> None:
    log = Log(MemorySegmentStore())
    p1, p2 = Producer(137, 5), Producer(983, 5)
    append(log, p1.batch(3))
    assert log.last_stable_offset(log.log_end_offset) == 0
    append(log, plain(3))
    append(log, p2.batch(3))  # offsets 6..8
    assert log.last_stable_offset(log.log_end_offset) == 0
    aborted_at = end(log, p1, commit=False)
    assert log.last_stable_offset(aborted_at) == 0  # the marker is not replicated yet
    assert log.last_stable_offset(aborted_at + 1) == 6
    committed_at = end(log, p2, commit=True)
    assert log.last_stable_offset(committed_at + 1) == log.log_end_offset
    assert log.open_transactions() == {}


def test_aborted_transaction_spanning_multiple_segments() -> None:
    p = Producer(137, 5)
    first = p.batch(3)
    log = Log(MemorySegmentStore(), segment_bytes=len(first))
    append(log, first)
    append(log, p.batch(3))
    assert log.segment_base_offsets() == [0, 3]
    at = end(log, p, commit=False)
    assert log.last_stable_offset(at + 1) == log.log_end_offset
    data = log.read(0, 2048, log.last_stable_offset(at + 1))
    aborted = log.aborted_transactions(0, data)
    assert [(a.producer_id, a.first_offset) for a in aborted] == [(137, 0)]


def test_a_fetch_gets_only_the_aborts_it_overlaps() -> None:
    log = Log(MemorySegmentStore())
    build_mixed(log)
    assert log.aborted_transactions(30, log.read(30, 1 << 20)) == [AbortedTxn(2, 8, 74, 36)]
    assert log.aborted_transactions(75, log.read(75, 1 << 20)) == []
    assert log.aborted_transactions(0, log.read(0, 100)) == [AbortedTxn(1, 0, 29, 8)]


def test_transaction_index_updated_through_replication() -> None:
    leader = Log(MemorySegmentStore())
    build_mixed(leader)
    follower = Log(MemorySegmentStore(), segment_bytes=700)
    follower.append_as_follower(leader.read(0, 1 << 20))
    assert all_aborted(follower) == all_aborted(leader)
    assert len(follower.segment_base_offsets()) > 1
    assert follower.last_stable_offset(30) == 8


def test_index_entries_a_crash_lost_after_the_last_snapshot_are_put_back() -> None:
    store = MemorySegmentStore()
    log = Log(store)  # no roll: no snapshot, the whole log is the tail
    build_mixed(log)
    expected = all_aborted(log)
    for name in [n for n in store.list() if n.endswith(".txnindex")]:
        store.delete(name)  # as if a crash lost the entries after their markers
    reopened = Log(store)
    assert reopened.last_stable_offset(reopened.log_end_offset) == reopened.log_end_offset
    assert all_aborted(reopened) == expected


def test_a_torn_index_entry_is_dropped_when_the_log_opens() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    build_mixed(log)
    name = "00000000000000000000.txnindex"
    store.append(name, b"\x00\x00\x01")  # a torn third entry
    reopened = Log(store)
    assert any(name in r for r in reopened.repairs)
    assert store.size(name) == 68


def test_truncation_cuts_the_index_and_reopens_the_transaction() -> None:
    log = Log(MemorySegmentStore())
    build_mixed(log)
    log.truncate_to(74)  # the ABORT of producer 2 at 74 goes
    assert all_aborted(log) == [AbortedTxn(1, 0, 29, 8)]
    assert log.open_transactions() == {2: 8, 4: 36}
    assert log.last_stable_offset(74) == 8


def test_zombie_coordinator_fenced() -> None:
    log = Log(MemorySegmentStore())
    p = Producer(1)
    append(log, p.batch(2))
    end(log, p, commit=True, coordinator_epoch=2)
    append(log, p.batch(2))
    with pytest.raises(RecordError) as exc:
        end(log, p, commit=False, coordinator_epoch=1)
    assert exc.value.code is ErrorCode.TRANSACTION_COORDINATOR_FENCED
    end(log, p, commit=False, coordinator_epoch=2)


def test_end_txn_with_fenced_producer_epoch() -> None:
    log = Log(MemorySegmentStore())
    p = Producer(1, epoch=1)
    append(log, p.batch(2))
    with pytest.raises(RecordError) as exc:
        log.append_marker(1, 0, Marker(False, 1), 0)
    assert exc.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.log_end_offset == 2


def test_a_plain_batch_inside_an_open_transaction_is_refused() -> None:
    log = Log(MemorySegmentStore())
    p = Producer(1)
    append(log, p.batch(2))
    plain_of_p = build_batch(
        [NewRecord(None, b"x")], base_timestamp=T0, producer_id=1, producer_epoch=0,
        base_sequence=p.seq,
    )  # fmt: skip
    with pytest.raises(RecordError) as exc:
        log.append_as_leader(plain_of_p, 0)
    assert exc.value.code is ErrorCode.INVALID_TXN_STATE


def test_transactional_batches_need_the_requests_transactional_id() -> None:
    log = Log(MemorySegmentStore())
    with pytest.raises(RecordError) as exc:
        log.append_as_leader(Producer(1).batch(1), 0)
    assert exc.value.code is ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_rebuild_transactional_state_after_a_clean_stop() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    p1, p2 = Producer(1), Producer(2)
    append(log, p1.batch(3))
    append(log, p2.batch(3))
    end(log, p2, commit=True)
    log.write_producer_snapshot()
    reopened = Log(store)
    assert reopened.open_transactions() == {1: 0}
    assert reopened.last_stable_offset(reopened.log_end_offset) == 0
    end(reopened, p1, commit=False)
    assert all_aborted(reopened)[-1] == AbortedTxn(1, 0, 7, 8)


def test_a_marker_is_a_control_batch_kafka_clients_skip() -> None:
    log = Log(MemorySegmentStore())
    p = Producer(7, epoch=3)
    append(log, p.batch(1))
    end(log, p, commit=True, coordinator_epoch=4)
    (_, h) = iter_batches(log.read(0, 1 << 20))
    assert h.attributes & 0x30 == 0x30
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.record_count) == (7, 3, -1, 1)


def test_after_a_fencing_abort_the_old_epoch_is_refused_and_the_new_starts_at_zero() -> None:
    """ProducerStateManager.checkProducerEpoch holds with no batch remembered: a coordinator's
    ABORT at a bumped epoch (a timeout or a new instance) fences the old producer's batches."""
    log = Log(MemorySegmentStore())
    old = Producer(5, epoch=0)
    append(log, old.batch(2))
    log.append_marker(5, 1, Marker(False, 0), 0)  # the fence: ABORT at epoch 1
    with pytest.raises(RecordError) as exc:
        append(log, old.batch(1))  # the zombie's late batch at epoch 0
    assert exc.value.code is ErrorCode.INVALID_PRODUCER_EPOCH
    assert log.open_transactions() == {}
    new = Producer(5, epoch=1)
    new.seq = 3
    with pytest.raises(RecordError) as exc:
        append(log, new.batch(1))
    assert exc.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    new.seq = 0
    append(log, new.batch(1))
    assert log.open_transactions() == {5: log.log_end_offset - 1}


# ---- transaction.partition.verification.enable (KIP-890 part 1; Kafka 3.6's UnifiedLog
# maybeStartTransactionVerification / batchMissingRequiredVerification; its UnifiedLogTest's
# testTransactionIsOngoingAndVerificationGuard, testEmptyTransactionStillClearsVerificationGuard)


def verified_append(log: Log, data: bytes, guard: object) -> None:
    log.append_as_leader(data, 0, transactional=True, verified=guard)  # type: ignore[arg-type]


def test_a_first_transactional_batch_needs_its_verification_guard() -> None:
    log = Log(MemorySegmentStore())
    p = Producer(1)
    guard = log.start_txn_verification(1)
    assert guard is not None and log.start_txn_verification(1) is guard  # one in flight
    with pytest.raises(RecordError) as exc:  # verification on, no guard: refused
        verified_append(log, p.batch(1), None)
    assert exc.value.code is ErrorCode.INVALID_TXN_STATE
    verified_append(log, p.batch(1), guard)
    # The transaction is open: later batches need no guard, and none is handed out.
    assert log.start_txn_verification(1) is None
    verified_append(log, p.batch(1), None)


def test_a_marker_written_while_the_coordinator_is_asked_voids_the_guard() -> None:
    # The ABA case: verified, then the transaction ends, then the stale answer arrives.
    log = Log(MemorySegmentStore())
    p = Producer(1)
    first = log.start_txn_verification(1)
    verified_append(log, p.batch(1), first)
    stale = log.start_txn_verification(1)  # None: open; a retry's request holds no guard
    end(log, p, commit=False)
    with pytest.raises(RecordError) as exc:
        verified_append(log, p.batch(1), stale)
    assert exc.value.code is ErrorCode.INVALID_TXN_STATE
    guard = log.start_txn_verification(1)
    end(log, p, commit=False)  # an abort with nothing written here clears it too
    with pytest.raises(RecordError):
        verified_append(log, p.batch(1), guard)
    assert log.start_txn_verification(1) is not guard


def test_with_verification_off_a_late_batch_opens_a_transaction_as_in_kafka_2_6() -> None:
    log = Log(MemorySegmentStore())
    p = Producer(1)
    append(log, p.batch(1))
    end(log, p, commit=False)
    append(log, p.batch(1))  # delayed past its abort: a hanging transaction
    assert log.open_transactions() == {1: 2}
