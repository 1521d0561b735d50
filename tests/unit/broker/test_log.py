"""The partition log: offsets, reads by offset, rolls, truncation, recovery and the epoch cache."""

from __future__ import annotations

import pytest

from broker.log import recovery as recovery_module
from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, parse_epochs
from broker.log.index import OffsetIndex
from broker.log.log import Log
from broker.log.log_types import OffsetOutOfRange
from broker.log.segment import index_file_name, segment_file_name
from broker.log.store import MemorySegmentStore, SegmentStore
from broker.replication.leader_epoch import EpochEntry
from minibroker.core import records
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, RecordError

FIRST = segment_file_name(0)


def batch(*values: bytes, base_offset: int = 0, epoch: int = -1) -> bytes:
    return records.build_batch(
        [NewRecord(None, v) for v in values],
        base_timestamp=1_700_000_000_000,
        base_offset=base_offset,
        partition_leader_epoch=epoch,
    )


def offsets(data: bytes) -> list[int]:
    """The offset of every record in `data`."""
    return [r.offset for r in records.decode_records(data)]


def fill(log: Log, batches: int, records_per_batch: int = 1, epoch: int = 0) -> None:
    for i in range(batches):
        log.append_as_leader(batch(*[b"v%d" % i] * records_per_batch), leader_epoch=epoch)


def flip_byte(store: SegmentStore, name: str, position: int) -> None:
    """Corrupt one byte through the protocol, so it works on any store."""
    data = bytearray(store.read(name, 0, store.size(name)))
    data[position] ^= 0xFF
    store.truncate(name, 0)
    store.append(name, bytes(data))


class CountingStore(MemorySegmentStore):
    """Remembers every read, to show which bytes a lookup touched."""

    def __init__(self) -> None:
        super().__init__()
        self.reads: list[tuple[str, int, int]] = []

    def read(self, name: str, position: int, size: int) -> bytes:
        self.reads.append((name, position, size))
        return super().read(name, position, size)


# ---- appends ----


def test_a_fresh_store_gets_one_empty_segment(store: SegmentStore) -> None:
    log = Log(store)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert store.list() == [index_file_name(0), FIRST]
    assert log.read(0, 1000) == b""


def test_append_as_leader_assigns_consecutive_offsets_and_stamps_the_epoch(
    store: SegmentStore,
) -> None:
    log = Log(store)
    first = log.append_as_leader(batch(b"a", b"b"), leader_epoch=3)
    log.append_as_leader(batch(b"c"), leader_epoch=3)
    third = log.append_as_leader(batch(b"d", b"e", b"f"), leader_epoch=3)
    assert (first.first_offset, first.last_offset, first.batch_count) == (0, 1, 1)
    assert (third.first_offset, third.last_offset, third.batch_count) == (3, 5, 1)
    assert log.log_end_offset == 6
    data = log.read(0, 1 << 20)
    headers = list(records.iter_batches(data, verify_crc=True))
    assert [h.base_offset for h in headers] == [0, 2, 3]
    assert {h.partition_leader_epoch for h in headers} == {3}
    assert offsets(data) == [0, 1, 2, 3, 4, 5]
    assert third.size_bytes == len(batch(b"d", b"e", b"f"))


def test_a_client_append_of_two_batches_is_refused_and_changes_nothing(
    store: SegmentStore,
) -> None:
    """Kafka takes one batch per partition from a client (LogValidator)."""
    log = Log(store)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    with pytest.raises(records.RecordError) as exc:
        log.append_as_leader(batch(b"b") + batch(b"c"), leader_epoch=0)
    assert exc.value.code is ErrorCode.INVALID_RECORD
    assert log.log_end_offset == 1
    assert offsets(log.read(0, 1 << 20)) == [0]


def test_append_as_follower_keeps_the_leaders_offsets(store: SegmentStore) -> None:
    log = Log(store)
    info = log.append_as_follower(batch(b"a", b"b", epoch=1) + batch(b"c", base_offset=2, epoch=2))
    assert (info.first_offset, info.last_offset) == (0, 2)
    assert [(h.base_offset, h.partition_leader_epoch) for h in log.batches()] == [(0, 1), (2, 2)]
    assert log.epoch_cache.entries == (EpochEntry(1, 0), EpochEntry(2, 2))


def test_append_as_follower_takes_the_gaps_a_compacted_leader_leaves() -> None:
    """Kafka's follower checks only that offsets increase from its LEO (a cleaned leader's
    log has gaps)."""
    log = Log(MemorySegmentStore())
    log.append_as_follower(batch(b"a", base_offset=1) + batch(b"c", base_offset=3))
    assert log.log_end_offset == 4
    assert [r.offset for r in records.decode_records(log.read(0, 1 << 20))] == [1, 3]
    assert [r.offset for r in records.decode_records(log.read(2, 1 << 20))] == [3]


@pytest.mark.parametrize(
    "data",
    [
        batch(b"a", b"b") + batch(b"c", base_offset=1),  # going backwards
        batch(b"a", b"b") + batch(b"c", base_offset=0),  # repeating offsets
    ],
)
def test_append_as_follower_rejects_offsets_that_do_not_continue_the_log(data: bytes) -> None:
    log = Log(MemorySegmentStore())
    with pytest.raises(RecordError) as raised:
        log.append_as_follower(data)
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE
    assert log.log_end_offset == 0
    assert log.batches() == []


@pytest.mark.parametrize("as_leader", [True, False])
def test_a_bad_crc_leaves_the_log_unchanged(as_leader: bool) -> None:
    store = MemorySegmentStore()
    log = Log(store)
    fill(log, 2)
    before = store.data(FIRST)
    bad = bytearray(batch(b"x", base_offset=2))
    bad[-1] ^= 0xFF
    with pytest.raises(RecordError, match="CRC") as raised:
        if as_leader:
            log.append_as_leader(bytes(bad), leader_epoch=0)
        else:
            log.append_as_follower(bytes(bad))
    assert raised.value.code == ErrorCode.CORRUPT_MESSAGE
    assert store.data(FIRST) == before
    assert log.log_end_offset == 2


def test_an_append_larger_than_a_segment_is_refused() -> None:
    log = Log(MemorySegmentStore(), segment_bytes=100)
    with pytest.raises(RecordError) as raised:
        log.append_as_leader(batch(b"x" * 100), leader_epoch=0)
    assert raised.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert log.log_end_offset == 0


# ---- reads ----


def test_a_read_from_the_middle_of_a_batch_returns_the_whole_batch(store: SegmentStore) -> None:
    log = Log(store)
    log.append_as_leader(batch(b"a", b"b", b"c"), leader_epoch=0)
    log.append_as_leader(batch(b"d", b"e"), leader_epoch=0)
    assert offsets(log.read(1, 1 << 20)) == [0, 1, 2, 3, 4]
    assert offsets(log.read(4, 1 << 20)) == [3, 4]


def test_max_bytes_returns_whole_batches_only_but_at_least_one(store: SegmentStore) -> None:
    log = Log(store)
    fill(log, 4)
    size = len(batch(b"v0"))
    assert offsets(log.read(0, 2 * size + size // 2)) == [0, 1]
    assert offsets(log.read(1, 2 * size)) == [1, 2]
    assert offsets(log.read(0, 1)) == [0]  # KIP-74: the first batch even if it is too large
    assert offsets(log.read(2, 0)) == [2]


def test_max_offset_stops_at_the_high_watermark(store: SegmentStore) -> None:
    log = Log(store)
    fill(log, 5, records_per_batch=2)
    assert offsets(log.read(0, 1 << 20, max_offset=6)) == [0, 1, 2, 3, 4, 5]
    assert log.read(6, 1 << 20, max_offset=6) == b""
    assert log.read(8, 1 << 20, max_offset=6) == b""  # past the HW but within the log
    assert log.read(10, 1 << 20) == b""  # at the LEO


def test_reads_span_segments(store: SegmentStore) -> None:
    size = len(batch(b"v0"))
    log = Log(store, segment_bytes=3 * size)
    fill(log, 8)
    assert log.segment_base_offsets() == [0, 3, 6]
    assert offsets(log.read(1, 1 << 20)) == list(range(1, 8))
    assert offsets(log.read(2, 3 * size)) == [2, 3, 4]
    assert offsets(log.read(4, 1 << 20, max_offset=7)) == [4, 5, 6]


def test_segments_roll_by_size_and_are_named_by_base_offset(store: SegmentStore) -> None:
    data = batch(b"a", b"b", b"c", b"d", b"e")
    log = Log(store, segment_bytes=2 * len(data))
    for _ in range(3):
        log.append_as_leader(data, leader_epoch=0)
    assert log.segment_base_offsets() == [0, 10]
    assert "00000000000000000010.log" in store.list()
    log2 = Log(MemorySegmentStore(), segment_bytes=len(data) + 1)
    log2.append_as_leader(data, leader_epoch=0)
    log2.append_as_leader(data, leader_epoch=0)
    assert log2.segment_base_offsets() == [0, 5]


@pytest.mark.parametrize("interval", [1, 100, 4096])
def test_the_index_lets_a_late_read_skip_the_start_of_the_segment(interval: int) -> None:
    store = CountingStore()
    log = Log(store, index_interval_bytes=interval)
    for i in range(300):
        log.append_as_leader(batch(b"%d" % i), leader_epoch=0)
    index = OffsetIndex.parse(0, store.data(index_file_name(0)), interval)
    assert len(index) > 0
    assert index.lookup(290) > 0
    store.reads.clear()
    assert offsets(log.read(290, 1 << 20)) == list(range(290, 300))
    assert min(position for _, position, _ in store.reads) >= index.lookup(290)
    # The log reads about one index interval to find the batch, then the answer.
    scanned = sum(size for name, _, size in store.reads if name == FIRST)
    assert scanned <= interval + records.HEADER_SIZE + len(log.read(290, 1 << 20))


def test_offsets_outside_the_log_are_out_of_range(store: SegmentStore) -> None:
    log = Log(store)
    fill(log, 3)
    with pytest.raises(OffsetOutOfRange, match="fetch offset 4 .* log end offset 3") as raised:
        log.read(4, 100)
    assert raised.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
    log.truncate_fully_and_start_at(10)
    with pytest.raises(OffsetOutOfRange, match="log start offset 10"):
        log.read(9, 100)


# ---- truncation ----


def test_truncate_to_the_middle_of_a_batch_removes_that_batch(store: SegmentStore) -> None:
    log = Log(store)
    log.append_as_leader(batch(b"a", b"b"), leader_epoch=0)
    log.append_as_leader(batch(b"c", b"d", b"e"), leader_epoch=0)
    log.truncate_to(3)
    assert log.log_end_offset == 2
    assert offsets(log.read(0, 1 << 20)) == [0, 1]
    log.truncate_to(5)  # at or past the LEO: nothing to do
    assert log.log_end_offset == 2
    log.append_as_leader(batch(b"f"), leader_epoch=0)
    assert offsets(log.read(0, 1 << 20)) == [0, 1, 2]


def test_truncate_across_segments_deletes_later_segment_files(store: SegmentStore) -> None:
    log = Log(store, segment_bytes=2 * len(batch(b"v0")), index_interval_bytes=1)
    fill(log, 7)
    assert log.segment_base_offsets() == [0, 2, 4, 6]
    log.truncate_to(3)
    assert log.segment_base_offsets() == [0, 2]
    assert log.log_end_offset == 3
    assert [n for n in store.list() if n.endswith((".log", ".index"))] == [
        index_file_name(0),
        FIRST,
        index_file_name(2),
        segment_file_name(2),
    ]
    log.truncate_to(2)  # the segment's first offset: the segment stays, empty
    assert (log.segment_base_offsets(), log.log_end_offset) == ([0, 2], 2)
    assert store.size(segment_file_name(2)) == 0
    fill(log, 1)
    assert Log(store).log_end_offset == 3


def test_truncate_below_the_log_start_starts_over_there() -> None:
    log = Log(MemorySegmentStore())
    log.truncate_fully_and_start_at(100)
    fill(log, 2)
    log.truncate_to(50)
    assert (log.log_start_offset, log.log_end_offset) == (50, 50)


def test_truncate_fully_and_start_at_leaves_one_empty_segment(store: SegmentStore) -> None:
    log = Log(store, segment_bytes=2 * len(batch(b"v0")))
    fill(log, 5, epoch=4)
    log.truncate_fully_and_start_at(42)
    assert (log.log_start_offset, log.log_end_offset) == (42, 42)
    assert log.segment_base_offsets() == [42]
    assert log.epoch_cache.entries == ()
    info = log.append_as_leader(batch(b"x"), leader_epoch=5)
    assert info.first_offset == 42
    reopened = Log(store)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (42, 43)
    assert reopened.epoch_cache.entries == (EpochEntry(5, 42),)


# ---- recovery ----


def test_reopening_keeps_everything_and_rebuilds_the_same_index(store: SegmentStore) -> None:
    log = Log(store, segment_bytes=1000, index_interval_bytes=100)
    fill(log, 40, records_per_batch=2)
    log.flush()
    files = {n: store.read(n, 0, store.size(n)) for n in store.list()}
    reopened = Log(store, segment_bytes=1000, index_interval_bytes=100)
    assert reopened.log_end_offset == 80
    assert reopened.segment_base_offsets() == log.segment_base_offsets()
    assert {n: store.read(n, 0, store.size(n)) for n in store.list()} == files
    assert reopened.read(0, 1 << 20) == log.read(0, 1 << 20)


def test_a_torn_tail_is_cut_on_recovery(store: SegmentStore) -> None:
    log = Log(store)
    fill(log, 3)
    store.append(FIRST, batch(b"half written", base_offset=3)[:30])
    reopened = Log(store)
    assert reopened.log_end_offset == 3
    assert store.size(FIRST) == 3 * len(batch(b"v0"))
    assert offsets(reopened.read(0, 1 << 20)) == [0, 1, 2]
    reopened.append_as_leader(batch(b"next"), leader_epoch=0)
    assert offsets(Log(store).read(0, 1 << 20)) == [0, 1, 2, 3]


def test_a_flipped_byte_in_the_last_batch_cuts_that_batch(store: SegmentStore) -> None:
    log = Log(store)
    fill(log, 3)
    flip_byte(store, FIRST, store.size(FIRST) - 2)  # inside the CRC'd records
    reopened = Log(store)
    assert reopened.log_end_offset == 2
    assert [h.base_offset for h in reopened.batches()] == [0, 1]


def test_memory_store_corrupt_is_caught_by_the_crc() -> None:
    store = MemorySegmentStore()
    fill(Log(store), 3)
    store.corrupt(FIRST, len(batch(b"v0")) + 40)  # the second batch
    assert Log(store).log_end_offset == 1


def test_a_corrupt_middle_segment_deletes_later_segments(store: SegmentStore) -> None:
    log = Log(store, segment_bytes=2 * len(batch(b"v0")))
    fill(log, 6)
    assert log.segment_base_offsets() == [0, 2, 4]
    flip_byte(store, segment_file_name(2), 50)
    reopened = Log(store)
    assert reopened.segment_base_offsets() == [0, 2]
    assert reopened.log_end_offset == 2
    assert segment_file_name(4) not in store.list()
    assert index_file_name(4) not in store.list()


def test_an_offset_flaw_outside_the_crc_ends_the_segment(store: SegmentStore) -> None:
    # baseOffset is not covered by the CRC, so recovery checks that offsets increase (they
    # may jump forward: a compacted log has gaps, as Kafka's recovery accepts).
    log = Log(store)
    fill(log, 3)
    flip_byte(store, FIRST, len(batch(b"v0")))  # high byte of the second batch's baseOffset
    assert Log(store).log_end_offset == 1


def test_recovery_reads_big_segments_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    store = MemorySegmentStore()
    log = Log(store)
    for i in range(20):
        log.append_as_leader(batch(*[b"x" * (i * 7)] * (i % 4 + 1)), leader_epoch=0)
    store.append(FIRST, batch(b"torn", base_offset=log.log_end_offset)[:-1])
    monkeypatch.setattr(recovery_module, "RECOVERY_CHUNK_BYTES", 100)  # smaller than most batches
    reopened = Log(store)
    assert reopened.log_end_offset == log.log_end_offset
    assert reopened.read(0, 1 << 20) == log.read(0, 1 << 20)


def test_a_crash_keeps_flushed_batches_only() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    fill(log, 3)
    log.flush()
    fill(log, 2)
    store.crash()
    assert Log(store).log_end_offset == 3


def test_flush_covers_a_segment_rolled_away_from() -> None:
    store = MemorySegmentStore()
    log = Log(store, segment_bytes=2 * len(batch(b"v0")))
    fill(log, 5)
    log.flush()
    store.crash()
    assert Log(store).log_end_offset == 5


def test_a_crash_that_loses_the_tail_of_a_rolled_segment_drops_later_segments() -> None:
    store = MemorySegmentStore()
    size = len(batch(b"v0"))
    log = Log(store, segment_bytes=2 * size)
    fill(log, 1)
    log.flush()
    fill(log, 2)  # offset 1 fills segment 0; offset 2 rolls to segment 2
    store.flush(segment_file_name(2))  # the new segment reached the disk, the old tail did not
    store.crash()
    reopened = Log(store)
    assert (reopened.segment_base_offsets(), reopened.log_end_offset) == ([0], 1)
    assert segment_file_name(2) not in store.list()


# ---- the leader-epoch cache ----


def test_the_epoch_cache_follows_appends_and_truncation_and_is_persisted(
    store: SegmentStore,
) -> None:
    log = Log(store)
    fill(log, 2, epoch=0)
    fill(log, 2, epoch=2)
    fill(log, 1, epoch=3)
    expected: tuple[EpochEntry, ...] = (EpochEntry(0, 0), EpochEntry(2, 2), EpochEntry(3, 4))
    assert log.epoch_cache.entries == expected
    checkpoint = store.read(LEADER_EPOCH_CHECKPOINT, 0, 1000)
    assert checkpoint == b"0\n3\n0 0\n2 2\n3 4\n"
    assert tuple(parse_epochs(checkpoint)) == expected
    assert Log(store).epoch_cache.entries == expected
    log.truncate_to(3)
    assert log.epoch_cache.entries == expected[:2]
    assert Log(store).epoch_cache.entries == expected[:2]


def test_reopening_drops_epochs_that_start_at_or_past_the_log_end(store: SegmentStore) -> None:
    log = Log(store)
    fill(log, 2, epoch=1)
    log.epoch_cache.assign(2, log.log_end_offset)  # make_leader with no batch appended yet
    assert len(log.epoch_cache.entries) == 2
    store.append(FIRST, b"torn")
    assert Log(store).epoch_cache.entries == (EpochEntry(1, 0),)
