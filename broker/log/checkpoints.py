"""Kafka's checkpoint files as text codecs (reference §3.5, §4.3), plus the atomic file write.

The format is Kafka's `CheckpointFile`: a version line `0`, a count line, then one entry per
line with fields separated by single spaces; readers split on any whitespace.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from broker.log.store import write_file_atomically
from broker.replication.leader_epoch import EpochEntry
from minibroker.core.types import TopicPartition

REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
# Same format: <topic> <partition> <log start offset>, for logs whose start is past their first
# segment's base (Kafka's LogManager.checkpointLogStartOffsetsInDir, reference ops §4).
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
CURRENT_VERSION = 0


class CheckpointError(ValueError):
    """A checkpoint file that is not in Kafka's format."""


def _format(lines: Sequence[str]) -> bytes:
    return "".join(f"{line}\n" for line in (str(CURRENT_VERSION), str(len(lines)), *lines)).encode()


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise CheckpointError(f"checkpoint {what} {text!r} is not an integer") from None


def _parse(data: bytes, fields: int, what: str) -> list[list[str]]:
    """The entry lines, each split into `fields` fields. An empty file has no entries, as in
    Kafka's CheckpointReadBuffer."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError as e:
        raise CheckpointError(f"{what} checkpoint is not UTF-8 text: {e}") from None
    if not lines:
        return []
    version = _int(lines[0].strip(), "version")
    if version != CURRENT_VERSION:
        raise CheckpointError(
            f"unrecognized {what} checkpoint version {version} (expected {CURRENT_VERSION})"
        )
    if len(lines) < 2:
        raise CheckpointError(f"{what} checkpoint has a version line but no count line")
    expected = _int(lines[1].strip(), "count")
    entries = [line.split() for line in lines[2:]]
    for line, parts in zip(lines[2:], entries, strict=True):
        if len(parts) != fields:
            raise CheckpointError(f"malformed {what} checkpoint line {line!r}")
    if len(entries) != expected:
        raise CheckpointError(f"{what} checkpoint says {expected} entries but holds {len(entries)}")
    return entries


# ---- replication-offset-checkpoint: <topic> <partition> <hw> (reference §3.5) ----


def format_offsets(entries: Mapping[TopicPartition, int]) -> bytes:
    """The file's bytes, partitions in sorted order so the same state gives the same file."""
    lines = []
    for tp in sorted(entries):
        if not tp.topic or any(c.isspace() for c in tp.topic):
            raise CheckpointError(f"topic {tp.topic!r} cannot be written to a checkpoint")
        lines.append(f"{tp.topic} {tp.partition} {entries[tp]}")
    return _format(lines)


def parse_offsets(data: bytes) -> dict[TopicPartition, int]:
    out: dict[TopicPartition, int] = {}
    for topic, partition, offset in _parse(data, 3, "offset"):
        tp = TopicPartition(topic, _int(partition, "partition"))
        out[tp] = _int(offset, "offset")
        if tp.partition < 0 or out[tp] < 0:
            raise CheckpointError(
                f"offset checkpoint line {topic} {partition} {offset} is negative"
            )
    return out


def write_offsets_checkpoint(path: Path, entries: Mapping[TopicPartition, int]) -> None:
    write_file_atomically(path, format_offsets(entries))


def read_offsets_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """The checkpointed offsets; a missing file means none (a fresh log dir)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return {}
    return parse_offsets(data)


def load_offsets_checkpoint(path: Path) -> tuple[dict[TopicPartition, int], str | None]:
    """The checkpointed offsets and None; or, if the file cannot be read or parsed, no offsets
    and why. A broker must start with a garbled checkpoint: every HW then starts at 0 (clamped
    to the log) and is learned again from the leader, and the next checkpoint rewrites the file.
    (Kafka takes the log dir offline instead; a test bed should recover.)"""
    try:
        return read_offsets_checkpoint(path), None
    except (CheckpointError, OSError) as exc:
        return {}, str(exc)


# ---- leader-epoch-checkpoint: <epoch> <startOffset> (reference §4.3) ----


def format_epochs(entries: Sequence[EpochEntry]) -> bytes:
    return _format([f"{e.epoch} {e.start_offset}" for e in entries])


def parse_epochs(data: bytes) -> list[EpochEntry]:
    return [
        EpochEntry(_int(epoch, "epoch"), _int(start, "start offset"))
        for epoch, start in _parse(data, 2, "leader epoch")
    ]
