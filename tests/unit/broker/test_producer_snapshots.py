"""Producer-state snapshots: Kafka 2.6's file format (ProducerStateManagerTest's
testTakeSnapshot / testRecoverFromSnapshot / testLoadFromCorruptSnapshotFile /
testTruncateAndReloadRemovesOutOfRangeSnapshots), written at each roll and at a clean stop,
so that opening a log reads only the batches after the last snapshot."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from broker.log import producer_snapshot as snap
from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from minibroker.core import records
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, RecordError

T0 = 1_700_000_000_000


def idem(value: bytes, pid: int, seq: int, n: int = 1) -> bytes:
    return records.build_batch(
        [NewRecord(None, value)] * n, base_timestamp=T0, producer_id=pid, producer_epoch=2,
        base_sequence=seq,
    )  # fmt: skip


class CountingStore(MemorySegmentStore):
    def __init__(self) -> None:
        super().__init__()
        self.reads: list[str] = []

    def read(self, name: str, position: int, size: int) -> bytes:
        self.reads.append(name)
        return super().read(name, position, size)


def test_the_file_is_kafkas_layout() -> None:
    entry = snap.SnapshotEntry(7, 2, 9, 40, 3, T0)
    data = snap.encode([entry])
    assert struct.unpack_from(">h", data)[0] == 1
    assert struct.unpack_from(">I", data, 2)[0] == crc32c(data[6:])
    assert struct.unpack_from(">i", data, 6)[0] == 1
    assert len(data) == 10 + 46
    assert struct.unpack_from(">qhiqiqiq", data, 10) == (7, 2, 9, 40, 3, T0, -1, -1)
    assert snap.decode(data) == [entry]
    assert snap.file_name(40) == "00000000000000000040.snapshot"


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: d[:-1],
        lambda d: b"\x00\x02" + d[2:],
        lambda d: d[:12] + bytes([d[12] ^ 1]) + d[13:],
    ],
    ids=["torn", "version", "bit-flip"],
)
def test_a_damaged_snapshot_does_not_decode(damage: object) -> None:
    data = snap.encode([snap.SnapshotEntry(7, 2, 9, 40, 3, T0)])
    with pytest.raises(snap.CorruptSnapshot):
        snap.decode(damage(data))  # type: ignore[operator]


def test_rolls_write_snapshots_and_a_restart_reads_only_the_tail() -> None:
    store = CountingStore()
    one = len(idem(b"a", 7, 0))
    log = Log(store, segment_bytes=2 * one)
    for seq in range(6):
        log.append_as_leader(idem(b"a", 7, seq), leader_epoch=0)
    assert [n for n in store.list() if n.endswith(".snapshot")] == [
        snap.file_name(2), snap.file_name(4)]  # fmt: skip
    log.flush()
    reopened = Log(store, segment_bytes=2 * one)
    store.reads.clear()
    info = reopened.append_as_leader(idem(b"a", 7, 6), leader_epoch=0)  # in sequence: accepted
    assert info.first_offset == 6
    assert not any(n.startswith(f"{0:020d}") or n.startswith(f"{2:020d}") for n in store.reads)
    with pytest.raises(RecordError) as refused:
        reopened.append_as_leader(idem(b"a", 7, 9), leader_epoch=0)
    assert refused.value.code is ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_a_clean_stop_snapshot_makes_the_restart_read_no_batch() -> None:
    store = CountingStore()
    log = Log(store)
    for seq in range(3):
        log.append_as_leader(idem(b"a", 7, seq), leader_epoch=0)
    log.write_producer_snapshot()
    log.flush()
    reopened = Log(store)
    store.reads.clear()
    dup = reopened.append_as_leader(idem(b"a", 7, 2), leader_epoch=0)  # a retry of the last
    assert (dup.first_offset, dup.batch_count) == (2, 0)
    assert not any(n.endswith(".log") for n in store.reads)


def test_a_damaged_snapshot_is_discarded_and_the_state_rebuilt_from_the_log() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    for seq in range(3):
        log.append_as_leader(idem(b"a", 7, seq), leader_epoch=0)
    log.write_producer_snapshot()
    log.flush()
    name = snap.file_name(3)
    data = bytearray(store.data(name))
    data[-1] ^= 0xFF
    store.write_atomic(name, bytes(data))
    reopened = Log(store)
    assert any(name in r and "discarded (CRC mismatch)" in r for r in reopened.repairs)
    assert name not in store.list()
    dup = reopened.append_as_leader(idem(b"a", 7, 2), leader_epoch=0)
    assert dup.batch_count == 0  # still recognised: rebuilt from the batches


def test_truncation_deletes_the_snapshots_past_the_new_end() -> None:
    store = MemorySegmentStore()
    one = len(idem(b"a", 7, 0))
    log = Log(store, segment_bytes=one)
    for seq in range(4):
        log.append_as_leader(idem(b"a", 7, seq), leader_epoch=0)
    assert snap.file_name(3) in store.list()
    log.truncate_to(2)
    assert [n for n in store.list() if n.endswith(".snapshot")] == [
        snap.file_name(1), snap.file_name(2)]  # fmt: skip
    info = log.append_as_leader(idem(b"a", 7, 2), leader_epoch=0)  # seq 2 follows again
    assert info.first_offset == 2


def test_snapshots_outside_the_log_are_deleted_at_open() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    log.append_as_leader(idem(b"a", 7, 0), leader_epoch=0)
    log.flush()
    store.write_atomic(snap.file_name(99), snap.encode([]))
    reopened = Log(store)
    assert snap.file_name(99) not in store.list()
    assert any("outside the log's offsets" in r for r in reopened.repairs)
