"""The broker's bounded pool of segment-file descriptors: many partitions' logs share a few
descriptors, and nothing is lost or misplaced when one is closed and opened again."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from broker.log.file_pool import FilePool
from broker.log.layout import open_log
from broker.log.store import FileSegmentStore
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition


def batch(value: bytes) -> bytes:
    return build_batch([NewRecord(None, value)], base_timestamp=1_700_000_000_000)


def test_many_stores_share_a_few_descriptors_and_keep_every_byte(tmp_path: Path) -> None:
    pool = FilePool(4)
    stores = [FileSegmentStore(tmp_path / f"p{i}", pool) for i in range(20)]
    for round_ in range(3):
        for i, store in enumerate(stores):
            store.append("a.log", f"{i}:{round_};".encode())
            assert pool.open_count() <= 4
    stores[7].truncate("a.log", len(b"7:0;"))
    for store in stores:
        store.flush("a.log")
    stores[7].append("a.log", b"after")  # lands at the new end, through a reopened descriptor
    for i, store in enumerate(stores):
        expected = b"7:0;after" if i == 7 else f"{i}:0;{i}:1;{i}:2;".encode()
        assert store.read("a.log", 0, 100) == expected
        assert store.size("a.log") == len(expected)
    assert pool.open_count() <= 4
    for store in stores:
        store.close()
    assert pool.open_count() == 0


def test_a_descriptor_in_use_is_not_closed_under_its_user(tmp_path: Path) -> None:
    pool = FilePool(4)
    (tmp_path / "held").write_bytes(b"held bytes")
    with pool.borrow(str(tmp_path / "held"), create=False) as held:
        assert held is not None
        for i in range(10):
            with pool.borrow(str(tmp_path / f"other{i}"), create=True) as other:
                assert other is not None and other.created
        assert os.pread(held.fd, 100, 0) == b"held bytes"
    assert pool.open_count() <= 4
    with pool.borrow(str(tmp_path / "other0"), create=True) as again:
        assert again is not None and not again.created
    with pool.borrow(str(tmp_path / "missing"), create=False) as missing:
        assert missing is None


def test_the_pool_refuses_a_capacity_too_small_to_append() -> None:
    with pytest.raises(ValueError, match="at least"):
        FilePool(1)


def test_logs_reopen_through_the_pool_with_their_data(tmp_path: Path) -> None:
    pool = FilePool(4)
    tps = [TopicPartition("t", p) for p in range(12)]
    logs = {tp: open_log(tmp_path, tp, pool) for tp in tps}
    for n in range(3):
        for tp, log in logs.items():
            log.append_as_leader(batch(f"{tp.partition}-{n}".encode()), leader_epoch=0)
    for log in logs.values():
        log.flush()
        log.close()
    again = {tp: open_log(tmp_path, tp, FilePool(4)) for tp in tps}
    for tp, log in again.items():
        assert log.log_end_offset == 3
        assert log.read(0, 1 << 20) == logs[tp].read(0, 1 << 20)


def test_thousands_of_partitions_fit_under_a_low_open_file_limit(tmp_path: Path) -> None:
    """2,500 partitions' logs under `ulimit -n 256`: 5,000 segment and index files would need
    twenty times that many descriptors if each kept its own open."""
    script = textwrap.dedent(
        f"""
        import resource
        from pathlib import Path
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
        from broker.log.file_pool import FilePool
        from broker.log.layout import open_log
        from minibroker.core.records import NewRecord, build_batch
        from minibroker.core.types import TopicPartition
        def batch(value):
            return build_batch([NewRecord(None, value)], base_timestamp=1_700_000_000_000)
        pool = FilePool(128)
        logs = [open_log(Path({str(tmp_path)!r}), TopicPartition("t", p), pool)
                for p in range(2500)]
        for p, log in enumerate(logs):
            log.append_as_leader(batch(str(p).encode()), leader_epoch=0)
        for log in logs:
            log.flush()
        for p, log in enumerate(logs):
            assert str(p).encode() in log.read(0, 1 << 20)
        assert pool.open_count() <= 128, pool.open_count()
        print("ok", pool.opens)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("ok")
