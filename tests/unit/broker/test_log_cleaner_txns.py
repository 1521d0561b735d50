"""The log cleaner and transactions, on a real Log (memory store): Kafka 2.6's LogCleanerTest
(testCleanSegmentsWithAbort, testCommitMarkerRemoval, testAbortMarkerRemoval,
testAbortMarkerRetentionWithEmptyBatch, testCommitMarkerRetentionWithEmptyBatch,
testCleanEmptyControlBatch, testAbortedTransactionSpanningSegments,
testCommittedTransactionSpanningSegments), with Kafka's expected offsets; and the cleaned
segment's aborted-transaction index through a crash at each step of the swap."""

from __future__ import annotations

import pytest

from broker.log.cleaner.clean import CleanPlan, CleanResult, clean
from broker.log.log import Log
from broker.log.segment import txn_index_file_name
from broker.log.store import MemorySegmentStore
from minibroker.core import records
from minibroker.core.control_records import Marker
from minibroker.core.records import TRANSACTIONAL_FLAG, NewRecord

T0 = 1_700_000_000_000
KEEP_MARKERS = 0  # a delete horizon every segment is past: markers and tombstones stay
DROP_MARKERS = 2**62  # one no segment is past: spent markers go


def new_log(store: MemorySegmentStore | None = None) -> Log:
    return Log(store or MemorySegmentStore(), segment_bytes=1 << 20, index_interval_bytes=64)


class Producer:
    """Kafka's appendTransactionalAsLeader: each call one transactional batch of keys."""

    def __init__(self, log: Log, pid: int, epoch: int = 0) -> None:
        self.log, self.pid, self.epoch, self.seq = log, pid, epoch, 0

    def __call__(self, *keys: int) -> None:
        batch = records.build_batch(
            [NewRecord(b"%d" % k, b"%d" % k) for k in keys], base_timestamp=T0,
            producer_id=self.pid, producer_epoch=self.epoch, base_sequence=self.seq,
            attributes=TRANSACTIONAL_FLAG,
        )  # fmt: skip
        self.seq += len(keys)
        self.log.append_as_leader(batch, 0, transactional=True)

    def commit(self) -> int:
        return self.log.append_marker(self.pid, self.epoch, Marker(True, 0), 0).last_offset

    def abort(self) -> int:
        return self.log.append_marker(self.pid, self.epoch, Marker(False, 0), 0).last_offset


def plain(log: Log, key: int) -> None:
    batch = records.build_batch([NewRecord(b"%d" % key, b"%d" % key)], base_timestamp=T0)
    log.append_as_leader(batch, 0)


def do_clean(log: Log, first_dirty: int, delete_horizon_ms: int) -> int:
    """Kafka's doClean(LogToClean(tp, log, firstDirty, activeSegment.baseOffset), horizon)."""
    result = plan_clean(log, first_dirty, delete_horizon_ms)
    for group in result.groups:
        retired = log.swap_in(group.replaced, group.segment, group.aborted)
        assert retired is not None
        log.unlink_retired(retired)
    return result.end_offset


def plan_clean(log: Log, first_dirty: int, delete_horizon_ms: int) -> CleanResult:
    infos = log.segment_infos()
    plan = CleanPlan(
        tuple(infos), first_dirty, infos[-1].base_offset, delete_horizon_ms, 1 << 20, 64, 1000,
        aborted=tuple(log.all_aborted()),
    )  # fmt: skip
    result = clean(log.store, plan)
    log.gap_horizon = max(log.gap_horizon, result.end_offset)
    return result


def _batches(log: Log) -> list[tuple[records.BatchHeader, list[records.Record]]]:
    data = log.read(log.log_start_offset, 1 << 30)
    return [(h, records.decode_batch(data, h)) for h in records.iter_batches(data)]


def data_records(log: Log) -> list[tuple[int, int]]:
    """(offset, key) of each data record (not a marker) with a value."""
    return [
        (r.offset, int(r.key or b""))
        for h, rs in _batches(log)
        if not h.attributes & 0x20
        for r in rs
        if r.value is not None
    ]


def keys_in_log(log: Log) -> list[int]:
    """LogTest.keysInLog: the data records' keys."""
    return [key for _, key in data_records(log)]


def offsets_in_log(log: Log) -> list[int]:
    """offsetsInLog: every record with a key and a value, markers included."""
    return [r.offset for _, rs in _batches(log) for r in rs if r.key and r.value is not None]


def last_offsets_per_batch(log: Log) -> list[int]:
    return [h.last_offset for h, _ in _batches(log)]


def aborted_in_index(log: Log) -> list[tuple[int, int, int]]:
    return [(a.producer_id, a.first_offset, a.last_offset) for a in log.all_aborted()]


def test_clean_segments_with_abort_removes_the_aborted_records_and_keeps_the_marker() -> None:
    """testCleanSegmentsWithAbort: an aborted transaction's record of a key neither wins over
    the committed one nor survives; its marker stays while its batch was read."""
    log = new_log()
    plain(log, 1)
    p = Producer(log, 7)
    p(1)
    marker_at = p.abort()
    for i in range(12):
        plain(log, 100 + i)
    log.roll()
    do_clean(log, 0, KEEP_MARKERS)
    assert [offset for offset, key in data_records(log) if key == 1] == [0]
    assert marker_at in offsets_in_log(log)
    assert aborted_in_index(log) == [(7, 1, marker_at)]


def test_commit_marker_removal() -> None:
    log = new_log()
    p = Producer(log, 1)
    p(1)
    p(2, 3)
    p.commit()
    p(2)
    p.commit()
    log.roll()
    # not in this pass: the transactions still have records
    dirty = do_clean(log, 0, DROP_MARKERS)
    assert keys_in_log(log) == [1, 3, 2]
    assert offsets_in_log(log) == [0, 2, 3, 4, 5]
    p(1, 3)
    p.commit()
    log.roll()
    # the marker at 3 stays: its transaction's batches were read in this pass
    dirty = do_clean(log, dirty, DROP_MARKERS)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    # not before the delete horizon
    dirty = do_clean(log, dirty, KEEP_MARKERS)
    assert offsets_in_log(log) == [3, 4, 5, 6, 7, 8]
    do_clean(log, dirty, DROP_MARKERS)
    assert keys_in_log(log) == [2, 1, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8]


def test_abort_marker_removal() -> None:
    log = new_log()
    p = Producer(log, 1)
    p(1)
    p(2, 3)
    p.abort()
    p(3)
    p.commit()
    log.roll()
    dirty = do_clean(log, 0, KEEP_MARKERS)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [3, 4, 5]
    assert aborted_in_index(log) == [(1, 0, 3)]
    do_clean(log, dirty, DROP_MARKERS)
    assert keys_in_log(log) == [3]
    assert offsets_in_log(log) == [4, 5]
    assert aborted_in_index(log) == []  # no marker, no entry


def test_abort_marker_retention_with_empty_batch() -> None:
    log = new_log()
    p = Producer(log, 1)
    p(2, 3)
    p.abort()
    log.roll()
    assert aborted_in_index(log) == [(1, 0, 2)]
    # the records go; the batch stays empty (the producer's last sequence), so the marker too
    dirty = do_clean(log, 0, DROP_MARKERS)
    assert aborted_in_index(log) == [(1, 0, 2)]
    assert (keys_in_log(log), offsets_in_log(log)) == ([], [2])
    assert last_offsets_per_batch(log) == [1, 2]
    dirty = do_clean(log, dirty, DROP_MARKERS)
    assert aborted_in_index(log) == [(1, 0, 2)]
    assert last_offsets_per_batch(log) == [1, 2]
    p(1)
    log.roll()
    # the empty batch goes now; the marker not yet, that pass read the batch
    dirty = do_clean(log, dirty, DROP_MARKERS)
    assert aborted_in_index(log) == [(1, 0, 2)]
    assert (keys_in_log(log), offsets_in_log(log)) == ([1], [2, 3])
    assert last_offsets_per_batch(log) == [2, 3]
    do_clean(log, dirty, DROP_MARKERS)
    assert (keys_in_log(log), offsets_in_log(log)) == ([1], [3])
    assert last_offsets_per_batch(log) == [3]
    assert aborted_in_index(log) == []


def test_commit_marker_retention_with_empty_batch() -> None:
    log = new_log()
    p1, p2 = Producer(log, 1), Producer(log, 2)
    p1(2, 3)  # 0, 1
    log.roll()
    p2(2, 3)  # 2, 3
    p2.commit()  # 4
    log.roll()
    plain(log, 2)  # 5
    plain(log, 3)  # 6
    p1.commit()  # 7
    log.roll()
    dirty = do_clean(log, 0, DROP_MARKERS)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [4, 5, 6, 7]
    assert last_offsets_per_batch(log) == [1, 3, 4, 5, 6, 7]
    dirty = do_clean(log, dirty, DROP_MARKERS)
    assert last_offsets_per_batch(log) == [1, 3, 4, 5, 6, 7]
    p2(1)  # 8
    p2.commit()  # 9
    log.roll()
    dirty = do_clean(log, dirty, DROP_MARKERS)
    assert keys_in_log(log) == [2, 3, 1]
    assert offsets_in_log(log) == [4, 5, 6, 7, 8, 9]
    assert last_offsets_per_batch(log) == [1, 4, 5, 6, 7, 8, 9]
    do_clean(log, dirty, DROP_MARKERS)
    assert offsets_in_log(log) == [5, 6, 7, 8, 9]
    assert last_offsets_per_batch(log) == [1, 5, 6, 7, 8, 9]


def test_clean_empty_control_batch() -> None:
    """A marker that is its producer's last entry stays as an empty control batch, which a
    later clean reads without harm."""
    log = new_log()
    Producer(log, 1).commit()  # 0
    plain(log, 2)  # 1
    plain(log, 3)  # 2
    log.roll()
    dirty = do_clean(log, 0, DROP_MARKERS)
    assert keys_in_log(log) == [2, 3]
    assert offsets_in_log(log) == [1, 2]
    assert last_offsets_per_batch(log) == [0, 1, 2]
    do_clean(log, dirty, DROP_MARKERS)
    assert offsets_in_log(log) == [1, 2]
    assert last_offsets_per_batch(log) == [0, 1, 2]


def test_transactions_spanning_segments_keep_their_batch_and_marker() -> None:
    """testCommittedTransactionSpanningSegments and testAbortedTransactionSpanningSegments."""
    log = new_log()
    p = Producer(log, 1)
    p(1)
    log.roll()
    p.commit()
    log.roll()
    do_clean(log, 0, DROP_MARKERS)
    assert (offsets_in_log(log), last_offsets_per_batch(log)) == ([0, 1], [0, 1])

    log = new_log()
    p = Producer(log, 1)
    p(1)
    log.roll()
    p.abort()
    log.roll()
    for _ in range(2):  # the batch stays empty (the producer's last), so the marker stays
        do_clean(log, 0, DROP_MARKERS)
        assert (offsets_in_log(log), last_offsets_per_batch(log)) == ([1], [0, 1])


def _aborted_log(store: MemorySegmentStore) -> Log:
    """Segments [0..], [marker's ...]: an aborted transaction whose marker a clean keeps
    (its batch is read) with an index entry in the cleaned segment."""
    log = new_log(store)
    plain(log, 1)
    p = Producer(log, 7)
    p(2)
    p.abort()
    plain(log, 1)
    log.roll()
    plain(log, 9)
    log.roll()
    return log


@pytest.mark.parametrize("renamed", [0, 1, 2, 3])
def test_a_swap_cut_short_keeps_the_cleaned_segments_aborted_transactions(renamed: int) -> None:
    """The broker dies with the clean written (its .swap files) and `renamed` of the swap's
    renames done: reopening finishes it, the cleaned segment's index entry included."""
    store = MemorySegmentStore()
    log = _aborted_log(store)
    result = plan_clean(log, 0, KEEP_MARKERS)
    (group,) = [g for g in result.groups if g.aborted]
    assert txn_index_file_name(group.segment.base_offset) + ".swap" in store.list()
    # swap_in's steps: the old files out, then the log, the index, the txn index in
    for info in group.replaced:
        base = info.base_offset
        for old in (info.log_name, f"{base:020d}.index", txn_index_file_name(base)):
            if old in store.list():
                store.retire(old)
    for name in group.swap_names[:renamed]:
        store.rename(name, name.removesuffix(".swap"))
    log.flush()
    reopened = Log(store, segment_bytes=1 << 20, index_interval_bytes=64,
                   gap_horizon=result.end_offset)  # fmt: skip
    assert aborted_in_index(reopened) == [(7, 1, 2)]
    assert not any(n.endswith((".swap", ".cleaned", ".deleted")) for n in store.list())
    assert keys_in_log(reopened) == [1, 9]  # the aborted record is gone, the marker stays
    assert reopened.log_end_offset == 5
    assert 2 in offsets_in_log(reopened)


def test_a_clean_cut_short_before_its_log_is_whole_leaves_the_old_segments() -> None:
    """The job stopped after its index files became .swap but before the log did: the old
    segments and their index stay, the half-written clean goes."""
    store = MemorySegmentStore()
    log = _aborted_log(store)
    result = plan_clean(log, 0, KEEP_MARKERS)
    (group,) = [g for g in result.groups if g.aborted]
    log_swap = group.swap_names[0]
    store.rename(log_swap, log_swap.removesuffix(".swap") + ".cleaned")
    log.flush()
    reopened = Log(store, segment_bytes=1 << 20, index_interval_bytes=64)
    assert aborted_in_index(reopened) == [(7, 1, 2)]
    assert keys_in_log(reopened) == [1, 2, 1, 9]
    assert not any(n.endswith((".swap", ".cleaned")) for n in store.list())
