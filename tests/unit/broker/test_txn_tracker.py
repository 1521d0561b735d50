"""A partition's transactions, its LSO and its aborted-transaction index, walked through as
Kafka 2.6's ProducerStateManagerTest (testLastStableOffsetCompletedTxn,
testNonTransactionalAppendWithOngoingTransaction, testTruncateAndReloadRemovesOutOfRange...)
and TransactionIndexTest (testCollectAbortedTransactions, testTruncate) do; and the markers'
bytes (EndTransactionMarkerTest)."""

from __future__ import annotations

import pytest

from broker.log import producer_snapshot as snap
from broker.log import txn_index
from broker.log.producer_state import ProducerStateTable, Refusal
from broker.log.txn_index import AbortedTxn, TxnIndexError
from broker.log.txn_tracker import CompletedTxn, TxnTracker
from minibroker.core.control_records import ControlRecordError, Marker, read_marker
from minibroker.core.errors import ErrorCode
from minibroker.core.records import CONTROL_FLAG, TRANSACTIONAL_FLAG, BatchHeader


def test_the_lso_stops_at_the_first_open_transaction_until_its_marker_is_replicated() -> None:
    t = TxnTracker()
    t.on_data(-1, 0, False)  # plain records: nothing unstable
    assert t.last_stable_offset(hw=5, log_start=0) == 5
    t.on_data(1, 5, True)
    t.on_data(1, 6, True)  # the same transaction
    t.on_data(2, 7, True)
    assert t.first_unstable_offset() == 5 and t.open_transactions() == {1: 5, 2: 7}
    assert t.last_stable_offset(hw=3, log_start=0) == 3  # the HW is lower
    assert t.last_stable_offset(hw=8, log_start=0) == 5
    done, aborted = t.on_marker(1, 8, commit=True)
    assert done == CompletedTxn(1, 5, 8, False) and aborted is None
    # decided, but its marker is not below the HW yet
    assert t.last_stable_offset(hw=8, log_start=0) == 5
    t.on_high_watermark(9)
    assert t.last_stable_offset(hw=9, log_start=0) == 7  # producer 2 is still open
    _, aborted = t.on_marker(2, 9, commit=False)
    assert aborted == AbortedTxn(2, 7, 9, 10)  # nothing else open: marker + 1
    t.on_high_watermark(10)
    assert t.first_unstable_offset() is None and t.last_stable_offset(10, 0) == 10


def test_an_abort_records_the_next_open_transaction_as_its_last_stable_offset() -> None:
    t = TxnTracker()
    t.on_data(1, 0, True)
    t.on_data(2, 3, True)
    _, aborted = t.on_marker(1, 4, commit=False)
    assert aborted == AbortedTxn(1, 0, 4, 3)


def test_a_plain_batch_during_an_open_transaction_is_refused() -> None:
    t = TxnTracker()
    t.on_data(1, 0, True)
    assert t.refuses_data(1, transactional=False)
    assert not t.refuses_data(1, transactional=True) and not t.refuses_data(2, False)


def test_a_marker_without_an_open_transaction_is_a_transaction_of_its_own() -> None:
    t = TxnTracker()
    done, aborted = t.on_marker(1, 4, commit=False)
    assert done.first_offset == 4 and aborted == AbortedTxn(1, 4, 4, 5)


def test_the_log_start_offset_bounds_the_lso() -> None:
    t = TxnTracker()
    t.on_data(1, 2, True)
    assert t.last_stable_offset(hw=10, log_start=6) == 6


def test_truncation_forgets_cut_transactions_and_reopens_a_cut_marker() -> None:
    t = TxnTracker()
    t.on_data(1, 0, True)
    t.on_marker(1, 3, commit=True)
    t.on_data(2, 4, True)
    t.truncate_to(3)  # the marker and producer 2's transaction are gone
    assert t.open_transactions() == {1: 0} and t.first_unstable_offset() == 0
    t.truncate_to(0)
    assert t.first_unstable_offset() is None


def test_index_entries_are_kafkas_34_bytes_and_a_torn_tail_is_dropped() -> None:
    e = AbortedTxn(7, 10, 20, 21)
    data = e.encode()
    assert len(data) == 34 and data[:2] == b"\x00\x00"
    assert txn_index.decode(data + data[:10]) == [e]
    with pytest.raises(TxnIndexError, match="version 1"):
        txn_index.decode(b"\x00\x01" + data[2:])


def test_collecting_aborted_transactions_for_a_read_committed_fetch() -> None:
    # producer 2's transaction was open (from 3) when producer 1's was aborted at 5
    entries = [AbortedTxn(1, 0, 5, 3), AbortedTxn(2, 3, 10, 11), AbortedTxn(3, 12, 20, 21)]
    assert txn_index.collect(entries, 6, 12) == ([entries[1]], True)  # 21 >= 12: complete
    assert txn_index.collect(entries, 0, 4) == (entries[:2], True)  # 11 >= 4: complete
    assert txn_index.collect(entries, 21, 40) == ([], False)
    assert txn_index.truncated(entries, 10) == entries[:1]
    assert txn_index.truncated(entries, 11) == entries[:2]


def test_markers_are_kafkas_control_records() -> None:
    m = Marker(commit=True, coordinator_epoch=5)
    assert (m.key(), m.value()) == (b"\x00\x00\x00\x01", b"\x00\x00\x00\x00\x00\x05")
    assert read_marker(m.key(), m.value()) == m
    abort = Marker(commit=False, coordinator_epoch=0)
    assert read_marker(abort.key(), b"\x00\x03\x00\x00\x00\x00") == abort  # newer: read as v0
    for key, value, why in [
        (b"\x00", m.value(), "4 bytes"),
        (b"\x00\x00\x00\x02", m.value(), "type 2"),
        (m.key(), b"\x00\x00\x00", "an epoch"),
        (m.key(), b"\xff\xff\x00\x00\x00\x00", "corrupt"),
    ]:
        with pytest.raises(ControlRecordError, match=why):
            read_marker(key, value)


# ---- the producer-state table with transactions ------------------------------------------------


def header(pid: int, offset: int, *, epoch: int = 0, seq: int = 0, n: int = 1, txn: bool = True,
           control: bool = False) -> BatchHeader:  # fmt: skip
    attributes = (TRANSACTIONAL_FLAG if txn else 0) | (CONTROL_FLAG if control else 0)
    return BatchHeader(
        position=0, base_offset=offset, batch_length=0, partition_leader_epoch=0, magic=2, crc=0,
        attributes=attributes, last_offset_delta=n - 1, base_timestamp=1, max_timestamp=2,
        producer_id=pid, producer_epoch=epoch, base_sequence=-1 if control else seq,
        record_count=n,
    )  # fmt: skip


def test_the_table_tracks_transactions_and_refuses_a_plain_batch_inside_one() -> None:
    table = ProducerStateTable()
    table.record([header(1, 0, seq=0, n=2)])
    assert table.txns.open_transactions() == {1: 0}
    # the next batch of the same producer, not transactional: INVALID_TXN_STATE
    refusal = table.check([header(1, 2, seq=2, txn=False)])
    assert isinstance(refusal, Refusal) and refusal.code == ErrorCode.INVALID_TXN_STATE
    assert table.check([header(1, 2, seq=2)]) is None
    # an older epoch is fenced before the transaction rule applies
    table.record([header(1, 2, epoch=1, seq=0)])  # epoch 1 (the same open transaction)
    refusal = table.check([header(1, 3, epoch=0, seq=1, txn=False)])
    assert isinstance(refusal, Refusal) and refusal.code == ErrorCode.INVALID_PRODUCER_EPOCH


def test_markers_end_transactions_and_are_checked_for_epochs() -> None:
    table = ProducerStateTable()
    table.record([header(1, 0, n=2)])
    done, aborted = table.record_marker(header(1, 2, control=True), Marker(False, 3))
    assert done == CompletedTxn(1, 0, 2, True) and aborted == AbortedTxn(1, 0, 2, 3)
    assert table.txns.open_transactions() == {}
    # a marker of an older coordinator: a zombie coordinator is fenced
    fenced = table.check_marker(1, 0, 2)
    assert isinstance(fenced, Refusal)
    assert fenced.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert table.check_marker(1, 0, 3) is None and table.check_marker(9, 0, 0) is None
    # a marker with a newer producer epoch (the coordinator fenced the producer) moves to it
    table.record_marker(header(1, 3, epoch=1, control=True), Marker(False, 3))
    old = table.check_marker(1, 0, 3)
    assert isinstance(old, Refusal) and old.code == ErrorCode.INVALID_PRODUCER_EPOCH
    # the producer's batches were forgotten with the old epoch: epoch 1 must start at 0
    assert table.check([header(1, 4, epoch=1, seq=0)]) is None


def test_a_snapshot_keeps_open_transactions_and_coordinator_epochs() -> None:
    table = ProducerStateTable()
    table.record([header(1, 0, n=2), header(2, 2, seq=0, txn=False)])
    table.record_marker(header(3, 3, control=True), Marker(True, 7))  # markers only
    entries = table.snapshot()
    assert [(e.producer_id, e.current_txn_first_offset, e.coordinator_epoch) for e in entries] == [
        (1, 0, -1), (2, -1, -1), (3, -1, 7),
    ]  # fmt: skip
    back = ProducerStateTable()
    back.load(snap.decode(snap.encode(entries)))
    assert back.txns.open_transactions() == {1: 0}
    assert back.snapshot() == entries
    # producer 1 came back with its transaction open but no batch: a plain batch is refused
    restarted = ProducerStateTable()
    restarted.load([snap.SnapshotEntry(1, 0, -1, -1, 0, 2, -1, 0)])
    refusal = restarted.check([header(1, 5, seq=0, txn=False)])
    assert isinstance(refusal, Refusal) and refusal.code == ErrorCode.INVALID_TXN_STATE
    fenced = back.check_marker(3, 0, 6)
    assert isinstance(fenced, Refusal) and fenced.code == ErrorCode.TRANSACTION_COORDINATOR_FENCED
