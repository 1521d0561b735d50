"""Opening a log whose files were damaged while the broker was down (issue 15 part 3), on real
files: the segment tail torn or garbled, garbage in the middle of the active segment, the index
garbled, cut, too long, pointing past the segment or missing, the leader-epoch checkpoint
garbled or inconsistent, the HW checkpoint garbled. The log opens, keeps exactly the valid
prefix, says what it repaired, and reads back what it kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from broker.log.checkpoints import (
    LEADER_EPOCH_CHECKPOINT,
    format_offsets,
    load_offsets_checkpoint,
    parse_epochs,
)
from broker.log.index import ENTRY_SIZE
from broker.log.log import Log
from broker.log.segment import index_file_name, segment_file_name
from broker.log.store import FileSegmentStore
from broker.replication.leader_epoch import EpochEntry
from minibroker.core import records
from minibroker.core.records import NewRecord
from minibroker.core.types import TopicPartition

SEGMENT, INDEX = segment_file_name(0), index_file_name(0)


def open_log(d: Path) -> Log:
    # A small index interval, so the index has entries to damage.
    return Log(FileSegmentStore(d), index_interval_bytes=64)


def written(d: Path, batches: int = 12) -> tuple[list[bytes], list[int]]:
    """`batches` batches of 3 records under leader epochs 0, 0, 0, 2, 2, 2, 5, ...; the
    values and each batch's end position in the segment."""
    log = open_log(d)
    values, ends = [], []
    for i in range(batches):
        vs = [b"value-%d-%d" % (i, j) for j in range(3)]
        log.append_as_leader(
            records.build_batch([NewRecord(None, v) for v in vs], base_timestamp=0),
            leader_epoch=[0, 2, 5, 9][i // 3 % 4],
        )
        values += vs
        ends.append((d / SEGMENT).stat().st_size)
    log.flush()
    return values, ends


def values_of(log: Log) -> list[bytes | None]:
    return [r.value for r in records.decode_records(log.read(0, 1 << 24))]


def test_a_torn_tail_is_cut_to_the_last_whole_batch(tmp_path: Path) -> None:
    values, ends = written(tmp_path)
    with (tmp_path / SEGMENT).open("r+b") as f:
        f.truncate(ends[-1] - 7)
    log = open_log(tmp_path)
    assert log.log_end_offset == 33 and values_of(log) == values[:33]
    assert (tmp_path / SEGMENT).stat().st_size == ends[-2]
    assert any("truncated" in r and "offset 33" in r for r in log.repairs), log.repairs


@pytest.mark.parametrize("batch_index", [11, 6, 0])
def test_garbage_inside_a_batch_drops_it_and_everything_after(
    tmp_path: Path, batch_index: int
) -> None:
    values, ends = written(tmp_path)
    start = ends[batch_index - 1] if batch_index else 0
    with (tmp_path / SEGMENT).open("r+b") as f:
        f.seek(start + 70)  # inside the records: the CRC fails
        f.write(b"\xde\xad\xbe\xef")
    log = open_log(tmp_path)
    assert log.log_end_offset == 3 * batch_index
    assert values_of(log) == values[: 3 * batch_index]
    assert any("truncated" in r for r in log.repairs), log.repairs
    # Everything the log says it holds is consistent: it appends and reopens cleanly.
    log.append_as_leader(records.build_batch([NewRecord(None, b"new")], base_timestamp=0), 9)
    log.flush()
    again = open_log(tmp_path)
    assert values_of(again) == [*values[: 3 * batch_index], b"new"] and not again.repairs


INDEX_DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "garbage": lambda b: bytes(range(256))[: len(b)],
    "cut": lambda b: b[: len(b) // 2 + 3],
    "too-long": lambda b: b + b"\x7f" * (5 * ENTRY_SIZE),
    "past-the-segment": lambda b: b[:-ENTRY_SIZE] + (10**6).to_bytes(4, "big") * 2,
    "empty": lambda b: b"",
}


@pytest.mark.parametrize("damage", INDEX_DAMAGE, ids=list(INDEX_DAMAGE))
def test_a_damaged_index_is_rebuilt_from_the_segment(tmp_path: Path, damage: str) -> None:
    values, _ = written(tmp_path)
    good = (tmp_path / INDEX).read_bytes()
    assert len(good) >= 2 * ENTRY_SIZE
    (tmp_path / INDEX).write_bytes(INDEX_DAMAGE[damage](good))
    log = open_log(tmp_path)
    assert (tmp_path / INDEX).read_bytes() == good
    assert log.repairs == (f"{INDEX}: rebuilt from the segment",)
    assert values_of(log) == values
    for offset in range(0, 36, 5):  # reads through the rebuilt index
        assert records.decode_records(log.read(offset, 1))[0].offset <= offset


def test_a_missing_index_is_rebuilt(tmp_path: Path) -> None:
    values, _ = written(tmp_path)
    good = (tmp_path / INDEX).read_bytes()
    (tmp_path / INDEX).unlink()
    log = open_log(tmp_path)
    assert (tmp_path / INDEX).read_bytes() == good and values_of(log) == values


BATCH_EPOCHS = (EpochEntry(0, 0), EpochEntry(2, 9), EpochEntry(5, 18), EpochEntry(9, 27))
EPOCH_DAMAGE = {
    "garbage": b"\x00\xff not a checkpoint \x01",
    "wrong-version": b"7\n1\n0 0\n",
    "count-lies": b"0\n5\n0 0\n",
    "not-increasing": b"0\n2\n5 0\n2 9\n",
    "negative": b"0\n1\n-3 0\n",
    "half-a-line": b"0\n2\n0 0\n2\n",
}


@pytest.mark.parametrize("damage", EPOCH_DAMAGE, ids=list(EPOCH_DAMAGE))
def test_a_damaged_leader_epoch_checkpoint_is_rebuilt_from_the_batches(
    tmp_path: Path, damage: str
) -> None:
    written(tmp_path)
    assert parse_epochs((tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes()) == list(BATCH_EPOCHS)
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(EPOCH_DAMAGE[damage])
    log = open_log(tmp_path)
    assert log.epoch_cache.entries == BATCH_EPOCHS
    assert parse_epochs((tmp_path / LEADER_EPOCH_CHECKPOINT).read_bytes()) == list(BATCH_EPOCHS)
    assert len(log.repairs) == 1 and "rebuilt from the batches" in log.repairs[0]


def test_a_missing_leader_epoch_checkpoint_is_rebuilt(tmp_path: Path) -> None:
    written(tmp_path)
    (tmp_path / LEADER_EPOCH_CHECKPOINT).unlink()
    assert open_log(tmp_path).epoch_cache.entries == BATCH_EPOCHS


def test_epoch_entries_past_the_log_end_are_dropped(tmp_path: Path) -> None:
    written(tmp_path)
    (tmp_path / LEADER_EPOCH_CHECKPOINT).write_bytes(b"0\n3\n0 0\n2 9\n7 500\n")
    log = open_log(tmp_path)
    assert log.epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(2, 9))
    assert any("past the log end offset" in r for r in log.repairs)


@pytest.mark.parametrize(
    "data",
    [b"\xff\xfe garbage", b"0\n2\nt 0 5\n", b"3\n1\nt 0 5\n", b"0\n1\nt 0 -5\n", b"0\n1\nt x 5\n"],
)
def test_an_unreadable_hw_checkpoint_is_discarded_with_the_reason(
    tmp_path: Path, data: bytes
) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(data)
    offsets, why = load_offsets_checkpoint(path)
    assert offsets == {} and why


def test_a_readable_hw_checkpoint_loads(tmp_path: Path) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_bytes(format_offsets({TopicPartition("t", 0): 5, TopicPartition("t", 1): 0}))
    assert load_offsets_checkpoint(path) == (
        {TopicPartition("t", 0): 5, TopicPartition("t", 1): 0},
        None,
    )
    assert load_offsets_checkpoint(tmp_path / "absent") == ({}, None)
