"""Where a partition's files live under a broker's log dir: `<log.dirs>/<topic>-<partition>/`,
Kafka's layout (the broker-wide checkpoint files sit beside these directories)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from broker.log.file_pool import FilePool
from broker.log.log import Log
from broker.log.store import FileSegmentStore
from minibroker.core.types import TopicPartition


def partition_dir(log_dir: Path, tp: TopicPartition) -> Path:
    return log_dir / f"{tp.topic}-{tp.partition}"


def parse_partition_dir(name: str) -> TopicPartition | None:
    """The partition a directory name belongs to, or None for anything else."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        return None
    return TopicPartition(topic, int(partition))


def open_log(
    log_dir: Path, tp: TopicPartition, pool: FilePool | None = None, **options: Any
) -> Log:
    """Open (and recover) the partition's log on disk, creating its directory if needed; its
    files' descriptors come from `pool` (the broker's), or a small pool of its own."""
    return Log(FileSegmentStore(partition_dir(log_dir, tp), pool), **options)
