"""Reading replicas' files from outside: Kafka's segment names, batches and values in offset
order, a torn tail cut as recovery would, and both checkpoint files."""

from __future__ import annotations

from pathlib import Path

from minibroker.core.batch_validation import validate_and_stamp
from minibroker.core.records import NewRecord, build_batch
from minibroker.scenarios.logfiles import (
    read_epoch_checkpoint,
    read_offset_checkpoint,
    read_replica_log,
    segment_files,
)


def _stamped(values: list[str], offset: int, epoch: int) -> bytes:
    batch = build_batch([NewRecord(None, v.encode()) for v in values], base_timestamp=1)
    return validate_and_stamp(
        batch, next_offset=offset, partition_leader_epoch=epoch, max_batch_bytes=1 << 20
    ).data


def _write_partition(log_dir: Path) -> Path:
    d = log_dir / "t-0"
    d.mkdir(parents=True)
    (d / f"{0:020d}.log").write_bytes(_stamped(["a", "b"], 0, 0) + _stamped(["c"], 2, 1))
    torn = _stamped(["e"], 4, 2)
    (d / f"{3:020d}.log").write_bytes(_stamped(["d"], 3, 1) + torn[:-5])
    (d / f"{0:020d}.index").write_bytes(b"")
    (d / "leader-epoch-checkpoint").write_text("0\n3\n0 0\n1 2\n2 4\n")
    return d


def test_segments_are_read_in_base_offset_order(tmp_path: Path) -> None:
    d = _write_partition(tmp_path)
    assert [p.name for p in segment_files(d)] == [f"{0:020d}.log", f"{3:020d}.log"]
    log = read_replica_log(tmp_path, 7, "t", 0)
    assert log.error == ""
    assert [(b.base_offset, b.last_offset, b.leader_epoch) for b in log.batches] == [
        (0, 1, 0),
        (2, 2, 1),
        (3, 3, 1),
    ]
    assert log.values == {0: "a", 1: "b", 2: "c", 3: "d"}
    assert log.log_end_offset == 4
    assert log.epochs == [(0, 0), (1, 2), (2, 4)]


def test_a_missing_partition_dir_is_an_error_not_an_exception(tmp_path: Path) -> None:
    log = read_replica_log(tmp_path, 1, "t", 5)
    assert log.batches == [] and "no directory" in log.error


def test_the_offset_checkpoint(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path) == {}
    (tmp_path / "replication-offset-checkpoint").write_text("0\n2\nt 0 17\nt 1 4\n")
    assert read_offset_checkpoint(tmp_path) == {("t", 0): 17, ("t", 1): 4}
    assert read_epoch_checkpoint(tmp_path) == []
