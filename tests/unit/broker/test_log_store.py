"""The partition directory's files: real ones and the memory store that can lose unflushed data."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.log.store import FileSegmentStore, MemorySegmentStore, SegmentStore


def test_a_crash_drops_bytes_that_were_not_flushed() -> None:
    store = MemorySegmentStore()
    store.append("a.log", b"durable")
    store.flush("a.log")
    store.append("a.log", b"-lost")
    store.append("b.log", b"never flushed")
    store.crash()
    assert store.data("a.log") == b"durable"
    assert store.data("b.log") == b""


def test_write_atomic_is_durable_at_once_and_truncate_lowers_the_durable_length() -> None:
    store = MemorySegmentStore()
    store.write_atomic("cp", b"0\n0\n")
    store.append("a.log", b"0123456789")
    store.flush("a.log")
    store.truncate("a.log", 4)
    store.append("a.log", b"xy")
    assert store.durable_size("a.log") == 4
    store.crash()
    assert store.data("cp") == b"0\n0\n"
    assert store.data("a.log") == b"0123"


def test_corrupt_flips_one_byte() -> None:
    store = MemorySegmentStore()
    store.append("a.log", b"\x00\x01")
    store.corrupt("a.log", 1)
    assert store.data("a.log") == b"\x00\xfe"


def test_files_round_trip(store: SegmentStore) -> None:
    assert store.list() == []
    assert store.size("a.log") == 0
    assert store.read("a.log", 0, 10) == b""
    store.append("b.log", b"hello ")
    store.append("b.log", b"world")
    store.append("a.log", b"")
    assert store.list() == ["a.log", "b.log"]
    assert store.size("b.log") == 11
    assert store.read("b.log", 6, 100) == b"world"
    store.flush("b.log")
    store.delete("a.log")
    store.delete("missing")
    assert store.list() == ["b.log"]


def test_appends_after_a_truncate_land_at_the_new_end(store: SegmentStore) -> None:
    store.append("a.log", b"0123456789")
    store.truncate("a.log", 3)
    store.append("a.log", b"abc")
    assert store.read("a.log", 0, 100) == b"012abc"
    assert store.size("a.log") == 6


def test_truncate_never_grows_a_file(store: SegmentStore) -> None:
    store.append("a.log", b"01")
    with pytest.raises(ValueError, match="grow"):
        store.truncate("a.log", 5)


def test_write_atomic_replaces_the_whole_file(store: SegmentStore) -> None:
    store.append("cp", b"old contents, longer")
    store.write_atomic("cp", b"new")
    assert store.read("cp", 0, 100) == b"new"
    store.append("cp", b"+")
    assert store.read("cp", 0, 100) == b"new+"
    assert store.list() == ["cp"]


def test_file_store_leaves_no_tmp_file_and_reopens(tmp_path: Path) -> None:
    store = FileSegmentStore(tmp_path / "p")
    store.write_atomic("leader-epoch-checkpoint", b"0\n0\n")
    store.append("00000000000000000000.log", b"abc")
    store.flush("00000000000000000000.log")
    store.close()
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "00000000000000000000.log",
        "leader-epoch-checkpoint",
    ]
    again = FileSegmentStore(tmp_path / "p")
    assert again.read("00000000000000000000.log", 0, 10) == b"abc"
    assert again.size("leader-epoch-checkpoint") == 4
    again.close()
