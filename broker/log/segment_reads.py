"""Reading batches out of one segment's file: its batch headers in order, the batch holding an
offset (the index puts the search within about one index interval), and the whole batches that
fit a fetch's budget. The log decides which segments to read; these read them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Sequence

from broker.log.segment import Segment
from broker.log.store import SegmentStore
from minibroker.core import records
from minibroker.core.records import HEADER_SIZE, BatchHeader


def headers(store: SegmentStore, segment: Segment, position: int = 0) -> Iterator[BatchHeader]:
    """A segment's batch headers from `position` (a batch's start) on, read a chunk at a time
    (batches' bodies skipped); positions are relative to the segment."""
    while position < segment.size:
        buf = store.read(segment.log_name, position, 1 << 20)
        at = 0
        while at + HEADER_SIZE <= len(buf):
            h = records.read_header(buf, at)
            yield dataclasses.replace(h, position=position + at)
            at += h.size
        if at == 0:
            break
        position += at


def locate(
    store: SegmentStore, segment: Segment, offset: int, index_interval_bytes: int
) -> BatchHeader:
    """The header (position within the segment) of the batch holding `offset`, or of the first
    batch after it when the offset itself is gone (a compacted segment)."""
    position = segment.index.lookup(offset)
    chunk_bytes = index_interval_bytes + HEADER_SIZE
    while position < segment.size:
        buf = store.read(segment.log_name, position, chunk_bytes)
        at = 0
        while at + HEADER_SIZE <= len(buf):
            h = records.read_header(buf, at)
            if h.last_offset >= offset:
                return dataclasses.replace(h, position=position + at)
            at += h.size
        if at == 0:
            break
        position += at  # the next header, possibly past a large batch we did not read
    raise AssertionError(f"offset {offset} not found in segment {segment.base_offset}")


def read_from(
    store: SegmentStore, segments: Sequence[Segment], position: int, max_bytes: int, limit: int
) -> bytes:
    """Whole batches from `position` in the first of `segments` on, across segments, at most
    `max_bytes` of them but always the first (KIP-74), ending below offset `limit`."""
    parts: list[bytes] = []
    budget = max_bytes
    for segment in segments:
        data = whole_batches(store, segment, position, budget, limit, min_one=not parts)
        if data:
            parts.append(data)
        budget -= len(data)
        # Go on to the next segment only if this one was read to its end with room left.
        if budget <= 0 or position + len(data) < segment.size or segment.next_offset >= limit:
            break
        position = 0
    return b"".join(parts)


def whole_batches(
    store: SegmentStore, segment: Segment, position: int, budget: int, limit: int, *, min_one: bool
) -> bytes:
    """The whole batches from `position` that fit in `budget` bytes and end below `limit`;
    with `min_one`, the first such batch even if it alone exceeds the budget (KIP-74)."""
    buf = store.read(segment.log_name, position, min(budget, segment.size - position))
    end = 0
    while end + HEADER_SIZE <= len(buf):
        h = records.read_header(buf, end)
        if h.last_offset >= limit or end + h.size > len(buf):
            break
        end += h.size
    if end == 0 and min_one:
        first = records.read_header(store.read(segment.log_name, position, HEADER_SIZE), 0)
        if first.last_offset < limit:
            return store.read(segment.log_name, position, first.size)
    return buf if end == len(buf) else buf[:end]
