"""The log cleaner on a real Log (memory store) and its pure rules: Kafka 2.6's LogCleanerTest
(testCleanSegments, testCleaningWithDeletes,
testRecoveryAfterCrash, testPartialSegmentClean, testCleaningWithKeysConflictingWithTxnMarkerKeys'
idea of keeping a producer's last batch), LogCleanerManagerTest (testCleanableOffsetsForNone,
testCleanableOffsetsActiveSegment, testCleanableOffsetsNeedsCheckpointReset,
testCompactionLagMs) and a property: whatever the workload, the cleaned log read from the start
gives every key its last value (or none after a tombstone), at its original offset."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.cleaner.clean import CleanAborted, CleanPlan, clean
from broker.log.cleaner.offset_map import OffsetMap
from broker.log.cleaner.policy import (
    Cleanable,
    CompactionConfig,
    cleanable,
    delete_horizon_ms,
    group_by_size,
)
from broker.log.log import Log
from broker.log.segment_replacement import SegmentInfo
from broker.log.store import MemorySegmentStore
from minibroker.core import records
from minibroker.core.records import NewRecord

T0 = 1_700_000_000_000
DAY = 86_400_000


def keyed(key: bytes, value: bytes | None, ts: int = T0, pid: int = -1, seq: int = -1) -> bytes:
    return records.build_batch(
        [NewRecord(key, value)], base_timestamp=ts, producer_id=pid,
        producer_epoch=0 if pid >= 0 else -1, base_sequence=seq,
    )  # fmt: skip


def new_log(store: MemorySegmentStore, segment_bytes: int = 300) -> Log:
    return Log(store, segment_bytes=segment_bytes, index_interval_bytes=64)


def run_clean(log: Log, config: CompactionConfig | None = None, checkpoint: int | None = None,
              now_ms: int = T0, map_capacity: int = 1000) -> int:  # fmt: skip
    """One clean as broker/log_cleaner.py does it, without the broker; its end offset."""
    config = config or CompactionConfig(min_cleanable_ratio=0.0)
    infos = log.segment_infos()
    found = cleanable(infos, config, checkpoint=checkpoint, log_start_offset=log.log_start_offset,
                      log_end_offset=log.log_end_offset, high_watermark=log.log_end_offset,
                      now_ms=now_ms)  # fmt: skip
    plan = CleanPlan(
        tuple(infos), found.first_dirty, found.first_uncleanable,
        delete_horizon_ms(infos, found.first_dirty, config.delete_retention_ms),
        300, 64, map_capacity,
    )  # fmt: skip
    result = clean(log.store, plan)
    log.gap_horizon = max(log.gap_horizon, result.end_offset)
    for group in result.groups:
        retired = log.swap_in(group.replaced, group.segment)
        assert retired is not None
        log.unlink_retired(retired)
    return result.end_offset


def state(log: Log) -> dict[bytes, tuple[int, bytes | None]]:
    """Each key's last record read from the start: (offset, value); None value = tombstone."""
    out: dict[bytes, tuple[int, bytes | None]] = {}
    for r in records.decode_records(log.read(log.log_start_offset, 1 << 30)):
        assert r.key is not None
        out[r.key] = (r.offset, r.value)
    return out


def offsets(log: Log) -> list[int]:
    return [r.offset for r in records.decode_records(log.read(log.log_start_offset, 1 << 30))]


def test_cleaning_keeps_each_keys_last_record_at_its_offset() -> None:
    """LogCleanerTest.testCleanSegments."""
    store = MemorySegmentStore()
    log = new_log(store)
    for i in range(30):
        log.append_as_leader(keyed(b"k%d" % (i % 5), b"v%d" % i), leader_epoch=0)
    before = state(log)
    log.roll()
    run_clean(log)
    assert state(log) == before
    assert offsets(log) == [25, 26, 27, 28, 29]
    assert log.size_bytes < 5 * 100
    reopened = Log(store, segment_bytes=300, index_interval_bytes=64, gap_horizon=log.gap_horizon)
    assert state(reopened) == before and not reopened.repairs


def test_tombstones_stay_for_delete_retention_then_go() -> None:
    """LogCleanerTest.testCleaningWithDeletes: a tombstone outlives the first clean and is
    removed once its segment is older than the delete horizon."""
    store = MemorySegmentStore(clock=lambda: T0)
    log = new_log(store)
    for i in range(10):
        log.append_as_leader(keyed(b"k%d" % (i % 2), b"v%d" % i), leader_epoch=0)
    log.append_as_leader(keyed(b"k0", None), leader_epoch=0)
    log.roll()
    end = run_clean(log)
    assert state(log) == {b"k1": (9, b"v9"), b"k0": (10, None)}
    for name in store.list():  # what is cleaned now is two days old
        store.set_mtime(name, T0 - 2 * DAY)
    config = CompactionConfig(min_cleanable_ratio=0.0, delete_retention_ms=DAY)
    big = b"x" * 200  # segments too big to merge with the tombstone's (which keeps its time)
    log.append_as_leader(keyed(b"k2", big), leader_epoch=0)
    log.roll()
    end = run_clean(log, config, end)  # the horizon: the tombstone's own segment, less a day
    assert state(log)[b"k0"] == (10, None)
    log.append_as_leader(keyed(b"k3", big), leader_epoch=0)
    log.roll()
    run_clean(log, config, end)  # now: k2's segment (today) less a day, past the tombstone's
    assert state(log) == {b"k1": (9, b"v9"), b"k2": (11, big), b"k3": (12, big)}


def test_records_past_a_full_map_wait_for_the_next_clean() -> None:
    """LogCleanerTest.testPartialSegmentClean: the map holds 2 keys; the clean ends there."""
    log = new_log(MemorySegmentStore(), segment_bytes=10_000)
    for i in range(8):
        log.append_as_leader(keyed(b"k%d" % i, b"a"), leader_epoch=0)
    log.append_as_leader(keyed(b"k0", b"b"), leader_epoch=0)
    log.roll()
    end = run_clean(log, map_capacity=2)
    assert end == 2
    assert offsets(log) == list(range(9))
    run_clean(log, checkpoint=end, map_capacity=100)
    assert offsets(log) == list(range(1, 9))


def test_an_idempotent_producers_last_batch_stays_as_a_bare_header() -> None:
    log = new_log(MemorySegmentStore())
    log.append_as_leader(keyed(b"k", b"a", pid=7, seq=0), leader_epoch=0)
    log.append_as_leader(keyed(b"k", b"b"), leader_epoch=0)
    log.roll()
    run_clean(log)
    assert offsets(log) == [1]
    headers = log.batches()
    assert [(h.base_offset, h.record_count, h.producer_id) for h in headers] == [
        (0, 0, 7), (1, 1, -1)]  # fmt: skip
    # Its next batch is still checked against its sequence: a retry of seq 0 is a duplicate.
    info = log.append_as_leader(keyed(b"k", b"a", pid=7, seq=0), leader_epoch=0)
    assert (info.first_offset, info.batch_count) == (0, 0)


def test_a_follower_replicates_a_cleaned_log() -> None:
    leader = new_log(MemorySegmentStore())
    for i in range(12):
        leader.append_as_leader(keyed(b"k%d" % (i % 3), b"v%d" % i), leader_epoch=0)
    leader.roll()
    run_clean(leader)
    follower = Log(MemorySegmentStore())
    follower.append_as_follower(leader.read(0, 1 << 30))
    assert state(follower) == state(leader) and follower.log_end_offset == 12
    assert follower.gap_horizon == 9


def test_a_clean_cut_short_leaves_a_readable_log() -> None:
    """LogCleanerTest.testRecoveryAfterCrash: *.cleaned files are discarded; a *.swap file
    replaces the segments it covers, whether or not they were already renamed away."""
    store = MemorySegmentStore()
    log = new_log(store)
    for i in range(20):
        log.append_as_leader(keyed(b"k%d" % (i % 4), b"v%d" % i), leader_epoch=0)
    log.roll()
    want = state(log)
    infos = log.segment_infos()
    plan = CleanPlan(tuple(infos), 0, infos[-1].base_offset, 0, 300, 64, 100)
    result = clean(store, plan)  # swap files written, never swapped in: the broker died
    log.flush()
    store.append(infos[0].log_name + ".cleaned", b"half a clean")
    reopened = Log(store, segment_bytes=300, index_interval_bytes=64, gap_horizon=result.end_offset)
    assert state(reopened) == want
    assert offsets(reopened) == [16, 17, 18, 19]
    assert not any(n.endswith((".swap", ".cleaned")) for n in store.list())
    assert any("swapped in" in r for r in reopened.repairs)


def test_a_clean_whose_log_went_is_aborted_and_leaves_no_files() -> None:
    store = MemorySegmentStore()
    log = new_log(store)
    for i in range(10):
        log.append_as_leader(keyed(b"k", b"v%d" % i), leader_epoch=0)
    log.roll()
    infos = log.segment_infos()
    plan = CleanPlan(tuple(infos), 0, infos[-1].base_offset, 0, 300, 64, 100)
    with pytest.raises(CleanAborted):
        clean(store, plan, should_stop=lambda: True)
    assert not any(n.endswith((".swap", ".cleaned")) for n in store.list())
    result = clean(store, CleanPlan(tuple(infos), 0, infos[-1].base_offset, 0, 300, 64, 100))
    log.truncate_to(3)  # the log changed meanwhile: the finished clean no longer swaps in
    assert log.swap_in(result.groups[0].replaced, result.groups[0].segment) is None


def test_without_its_horizon_a_gap_reads_as_a_crash() -> None:
    """The gaps a clean leaves are taken only up to the log's gap horizon."""
    store = MemorySegmentStore()
    log = new_log(store)
    for i in range(20):
        log.append_as_leader(keyed(b"k%d" % (i % 4), b"v%d" % i), leader_epoch=0)
    log.roll()
    run_clean(log)
    log.flush()
    assert (
        Log(store, segment_bytes=300, index_interval_bytes=64).log_end_offset < 20
    )  # cut at the first gap


# ---- the rules (LogCleanerManagerTest) --------------------------------------------------------


def info(base: int, next_offset: int, size: int = 100, ts: int = T0) -> SegmentInfo:
    return SegmentInfo(base, size, next_offset, f"{base:020d}.log", ts, ts, ts)


SEGMENTS = [info(0, 10), info(10, 20), info(20, 30), info(30, 35)]  # the last one active


def find(**kw: int | None) -> Cleanable:
    args: dict[str, int | None] = dict(
        checkpoint=None, log_start_offset=0, log_end_offset=35, high_watermark=35, now_ms=T0
    )
    args.update(kw)
    return cleanable(SEGMENTS, CompactionConfig(), **args)  # type: ignore[arg-type]


def test_the_dirty_section_ends_before_the_active_segment_and_the_high_watermark() -> None:
    assert find().first_uncleanable == 30
    assert find(high_watermark=25).first_uncleanable == 20


def test_the_dirty_section_starts_at_the_checkpoint_and_resets_outside_the_log() -> None:
    got = find(checkpoint=20)
    assert (got.first_dirty, got.clean_bytes, got.dirty_bytes) == (20, 200, 100)
    reset = find(checkpoint=99)
    assert reset.first_dirty == 0 and reset.checkpoint_reset


def test_min_compaction_lag_keeps_recent_segments_dirty() -> None:
    segments = [info(0, 10), info(10, 20, ts=T0 + 5_000), info(20, 30)]
    got = cleanable(
        segments, CompactionConfig(min_compaction_lag_ms=10_000), checkpoint=None,
        log_start_offset=0, log_end_offset=30, high_watermark=30, now_ms=T0 + 12_000,
    )  # fmt: skip
    assert got.first_uncleanable == 10


def test_a_log_is_due_by_its_ratio_or_max_compaction_lag() -> None:
    config = CompactionConfig(min_cleanable_ratio=0.5)
    assert find(checkpoint=10).due(config)
    assert not find(checkpoint=20).due(config)
    overdue = cleanable(SEGMENTS, CompactionConfig(0.9, max_compaction_lag_ms=1000),
                        checkpoint=20, log_start_offset=0, log_end_offset=35,
                        high_watermark=35, now_ms=T0 + 2000)  # fmt: skip
    assert overdue.overdue and overdue.due(CompactionConfig(0.9, max_compaction_lag_ms=1000))


def test_the_delete_horizon_is_the_last_clean_segments_time_less_delete_retention() -> None:
    assert delete_horizon_ms(SEGMENTS, 0, DAY) == 0
    assert delete_horizon_ms(SEGMENTS, 20, DAY) == T0 - DAY


def test_segments_are_grouped_to_fit_one_segment() -> None:
    groups = group_by_size([info(0, 10, 100), info(10, 20, 150), info(20, 30, 100)], 260)
    assert [[s.base_offset for s in g] for g in groups] == [[0, 10], [20]]


def test_the_offset_map_is_bounded() -> None:
    m = OffsetMap(2)
    assert m.put(b"a", 1) and m.put(b"b", 2) and m.put(b"a", 3)
    assert not m.put(b"c", 4)
    assert (m.get(b"a"), m.get(b"c"), m.latest_offset) == (3, -1, 3)


# ---- the property -----------------------------------------------------------------------------

ops = st.lists(st.tuples(st.integers(0, 6), st.one_of(st.none(), st.binary(max_size=8))),
               min_size=1, max_size=60)  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(ops, st.integers(1, 8))
def test_any_workload_cleans_to_the_last_value_of_each_key(
    workload: list[tuple[int, bytes | None]], capacity: int
) -> None:
    store = MemorySegmentStore(clock=lambda: T0)
    log = new_log(store)
    model: dict[bytes, tuple[int, bytes | None]] = {}
    for i, (k, v) in enumerate(workload):
        log.append_as_leader(keyed(b"k%d" % k, v), leader_epoch=0)
        model[b"k%d" % k] = (i, v)
    log.roll()
    checkpoint = None
    for _ in range(8):  # a small map needs several cleans
        checkpoint = run_clean(log, checkpoint=checkpoint, map_capacity=capacity)
        if checkpoint >= len(workload):
            break
    assert state(log) == model  # tombstones are younger than delete.retention.ms: kept
    log.flush()
    assert (
        state(Log(store, segment_bytes=300, index_interval_bytes=64, gap_horizon=log.gap_horizon))
        == model
    )
