"""One segment's file names (Kafka's 20-digit base offsets) and what the log keeps in memory
about it, so reads never rescan it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

from broker.log.index import OffsetIndex
from broker.log.store import SegmentStore

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"


def segment_file_name(base_offset: int) -> str:
    """Kafka's name: the base offset zero-padded to 20 digits, e.g. 00000000000000000005.log."""
    return f"{base_offset:020d}{LOG_SUFFIX}"


def index_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{INDEX_SUFFIX}"


def base_offset_of(name: str, suffix: str) -> int | None:
    stem = name[: -len(suffix)]
    if name.endswith(suffix) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


@dataclass
class Segment:
    """What the log keeps in memory about one segment, so reads never rescan it."""

    base_offset: int
    index: OffsetIndex
    size: int
    next_offset: int

    @classmethod
    def empty(cls, base_offset: int, index_interval_bytes: int) -> Segment:
        return cls(base_offset, OffsetIndex(base_offset, index_interval_bytes), 0, base_offset)

    # Names made once: every read and append of the segment asks for them.
    @cached_property
    def log_name(self) -> str:
        return segment_file_name(self.base_offset)

    @cached_property
    def index_name(self) -> str:
        return index_file_name(self.base_offset)


def delete_segment_files(store: SegmentStore, base_offsets: Sequence[int]) -> None:
    for base in base_offsets:
        store.delete(segment_file_name(base))
        store.delete(index_file_name(base))
