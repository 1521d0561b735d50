"""A broker's log dir read from outside, as Kafka's DumpLogSegments would: segment files
(`<topic>-<p>/<base offset, 20 digits>.log`) and both checkpoint files. Read-only and
independent of the broker's code: the checker must not trust what it checks."""

from __future__ import annotations

from pathlib import Path

from minibroker.core.records import RecordError, decode_batch, valid_prefix
from minibroker.scenarios.history import ReplicaBatch, ReplicaLog

LOG_SUFFIX = ".log"
OFFSET_CHECKPOINT = "replication-offset-checkpoint"
EPOCH_CHECKPOINT = "leader-epoch-checkpoint"


def partition_dir(log_dir: Path, topic: str, partition: int) -> Path:
    return log_dir / f"{topic}-{partition}"


def segment_files(directory: Path) -> list[Path]:
    """The segment files in base-offset order (names that are not 20 digits + .log skipped)."""
    found = []
    for path in directory.glob(f"*{LOG_SUFFIX}"):
        stem = path.name[: -len(LOG_SUFFIX)]
        if len(stem) == 20 and stem.isdigit():
            found.append((int(stem), path))
    return [path for _, path in sorted(found)]


def _checkpoint_lines(text: str) -> list[list[str]]:
    """Kafka's CheckpointFile: version 0, a count, then the entries; [] when empty or unknown."""
    lines = text.splitlines()
    if len(lines) < 2 or lines[0].strip() != "0":
        return []
    return [line.split() for line in lines[2:] if line.strip()]


def read_offset_checkpoint(log_dir: Path) -> dict[tuple[str, int], int]:
    """(topic, partition) -> HW from the broker's replication-offset-checkpoint ({} if none)."""
    try:
        text = (log_dir / OFFSET_CHECKPOINT).read_text()
    except OSError:
        return {}
    out = {}
    for fields in _checkpoint_lines(text):
        if len(fields) == 3 and fields[1].isdigit() and fields[2].lstrip("-").isdigit():
            out[(fields[0], int(fields[1]))] = int(fields[2])
    return out


def read_epoch_checkpoint(directory: Path) -> list[tuple[int, int]]:
    """(epoch, start offset) entries of a partition's leader-epoch-checkpoint ([] if none)."""
    try:
        text = (directory / EPOCH_CHECKPOINT).read_text()
    except OSError:
        return []
    return [
        (int(f[0]), int(f[1]))
        for f in _checkpoint_lines(text)
        if len(f) == 2 and all(x.lstrip("-").isdigit() for x in f)
    ]


def read_replica_log(log_dir: Path, broker: int, topic: str, partition: int) -> ReplicaLog:
    """One replica's batches and values, in offset order. A torn tail (a killed broker's last
    write) ends the read of its segment, as the broker's recovery would cut it."""
    directory = partition_dir(log_dir, topic, partition)
    log = ReplicaLog(broker=broker, partition=partition)
    if not directory.is_dir():
        log.error = f"no directory {directory}"
        return log
    log.epochs = read_epoch_checkpoint(directory)
    for path in segment_files(directory):
        try:
            data = path.read_bytes()
        except OSError as exc:
            log.error = f"cannot read {path}: {exc.strerror}"
            return log
        length, headers = valid_prefix(data)
        for h in headers:
            log.batches.append(
                ReplicaBatch(h.base_offset, h.last_offset, h.partition_leader_epoch, h.crc)
            )
            try:
                records = decode_batch(data, h)
            except RecordError as exc:
                log.error = f"{path.name}: batch at offset {h.base_offset}: {exc}"
                continue
            for r in records:
                log.values[r.offset] = "" if r.value is None else r.value.decode(errors="replace")
    return log
