"""One clean of one log, in a worker thread (Kafka 2.6's Cleaner.doClean / cleanSegments /
cleanInto): build the offset map over the dirty section, then rewrite every segment below the
map's end, merged in groups that fit a segment, into `<base>.log.cleaned` files, fsynced and
renamed `<base>.log.swap`; the log swaps them in on the loop (segment_replacement.py).

What a record keeps (Cleaner.shouldRetainRecord): every record past the map's last offset; a
keyed record whose offset is its key's last; a tombstone (null value) only in a segment last
modified after the delete horizon; never a record without a key. A batch keeps its base and
last offset (core/batch_rewrite.py); a batch left empty stays as a bare header if it was its
producer's last one in the log (the producer's sequence and epoch survive, as Kafka's
RETAIN_EMPTY). Aborted transactions' records and spent markers go (transactions.py); a cleaned
segment's aborted-transaction index is written beside it as <base>.txnindex.swap, and its
<base>.log.swap is renamed last: a .log.swap means the whole clean is on disk.

The job reads and writes with descriptors of its own (store.*_unpooled) and never touches the
log's objects: it works from SegmentInfo copies, and the swap checks they still hold."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from broker.log.cleaner.offset_map import OffsetMap
from broker.log.cleaner.policy import group_by_size
from broker.log.cleaner.transactions import (
    CleanedTransactions,
    LastOfProducer,
    is_last_of_producer,
    track_last_of_producers,
)
from broker.log.segment import Segment, txn_index_file_name
from broker.log.segment_replacement import CLEANED_SUFFIX, SWAP_SUFFIX, SegmentInfo
from broker.log.store import FileSegmentStore, SegmentStore
from broker.log.txn_index import AbortedTxn
from minibroker.core import records
from minibroker.core.batch_rewrite import empty_header, rebuild, record_views
from minibroker.core.control_records import marker_of
from minibroker.core.records import CONTROL_FLAG, HEADER_SIZE, BatchHeader

READ_CHUNK_BYTES = 1 << 20
WRITE_CHUNK_BYTES = 8 << 20  # the cleaned segment is written in pieces of about this size


class CleanAborted(Exception):
    """The log changed under the job (its files went): nothing is swapped in."""


@dataclass(frozen=True)
class CleanPlan:
    segments: tuple[SegmentInfo, ...]  # the whole log as it was, the last one active
    first_dirty: int
    first_uncleanable: int
    delete_horizon_ms: int
    segment_bytes: int
    index_interval_bytes: int
    map_capacity: int
    # The log's aborted transactions (its .txnindex entries): their records take no part in
    # the key map and are removed; their markers go when spent (transactions.py).
    aborted: tuple[AbortedTxn, ...] = ()


@dataclass(frozen=True)
class CleanedGroup:
    replaced: tuple[SegmentInfo, ...]
    segment: Segment  # its files wait as <base>.log.swap and <base>.index.swap
    aborted: tuple[AbortedTxn, ...] = ()  # and these in <base>.txnindex.swap

    @property
    def swap_names(self) -> list[str]:
        names = [self.segment.log_name, self.segment.index_name]
        if self.aborted:
            names.append(txn_index_file_name(self.segment.base_offset))
        return [name + SWAP_SUFFIX for name in names]


@dataclass
class CleanResult:
    end_offset: int  # the next clean's first dirty offset (cleaner-offset-checkpoint)
    groups: list[CleanedGroup] = field(default_factory=list)
    keys: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    markers_removed: int = 0
    seconds: float = 0.0


def batches(store: SegmentStore, info: SegmentInfo) -> Iterator[tuple[bytes, BatchHeader]]:
    """Each batch of the segment with the buffer holding it (position within that buffer), a
    chunk read at a time; one batch larger than a chunk is read whole."""
    position = 0
    while position < info.size:
        buf = store.read_unpooled(
            info.log_name, position, min(READ_CHUNK_BYTES, info.size - position)
        )
        if len(buf) < HEADER_SIZE:
            raise CleanAborted(f"{info.log_name} ends early at byte {position}")
        at = 0
        while at + HEADER_SIZE <= len(buf):
            h = records.read_header(buf, at)
            if at + h.size > len(buf):
                break
            yield buf, h
            at += h.size
        if at == 0:  # one batch larger than the chunk
            h = records.read_header(buf, 0)
            whole = store.read_unpooled(info.log_name, position, h.size)
            if len(whole) < h.size:
                raise CleanAborted(f"{info.log_name} ends inside a batch at byte {position}")
            yield whole, records.read_header(whole, 0)
            at = h.size
        position += at


def build_offset_map(
    store: SegmentStore, plan: CleanPlan, offset_map: OffsetMap, result: CleanResult
) -> None:
    """Every key of the dirty section with its last offset, until the map is full."""
    # Kafka's collectAbortedTransactions(firstDirty, ...): those whose marker is not behind.
    txns = CleanedTransactions(a for a in plan.aborted if a.last_offset >= plan.first_dirty)
    for info in plan.segments[:-1]:
        if info.next_offset <= plan.first_dirty or info.base_offset >= plan.first_uncleanable:
            continue
        for buf, h in batches(store, info):
            if h.last_offset < plan.first_dirty:
                continue
            if h.base_offset >= plan.first_uncleanable:
                return
            if h.attributes & CONTROL_FLAG:
                txns.on_marker(h, marker_of(buf, h))
                continue
            if txns.on_data_batch(h):
                continue  # an aborted transaction's records
            _, views = record_views(buf, h)
            for r in views:
                in_range = plan.first_dirty <= r.offset < plan.first_uncleanable
                if in_range and r.key is not None and not offset_map.put(r.key, r.offset):
                    return  # full: this clean ends here


def last_batches_of_producers(store: SegmentStore, plan: CleanPlan) -> dict[int, LastOfProducer]:
    """Each producer's last entry in the log (kept, at least as a header, when cleaning
    empties it). Headers only; the active segment is read too."""
    last: dict[int, LastOfProducer] = {}
    for info in plan.segments:
        track_last_of_producers(last, (h for _, h in batches(store, info)))
    return last


def clean_directory(directory: str, plan: CleanPlan) -> CleanResult:
    """`clean` of the files in a partition directory: what the broker's cleaner process runs
    (its own descriptors; no object of the broker's crosses)."""
    return clean(FileSegmentStore(Path(directory)), plan)


def clean(
    store: SegmentStore, plan: CleanPlan, should_stop: Callable[[], bool] = lambda: False
) -> CleanResult:
    """The clean; its groups' swap files written. CleanAborted (its files removed) if the
    log's files went or `should_stop` says so."""
    started = time.monotonic()
    offset_map = OffsetMap(plan.map_capacity)
    result = CleanResult(end_offset=plan.first_uncleanable)
    written: list[str] = []
    try:
        build_offset_map(store, plan, offset_map, result)
        result.keys = len(offset_map)
        if offset_map.latest_offset >= 0 and len(offset_map) >= offset_map.capacity:
            result.end_offset = offset_map.latest_offset + 1
        last_of_producer = last_batches_of_producers(store, plan)
        # Carried from group to group, as Kafka's. Every aborted transaction is known from the
        # start, where Kafka collects them segment by segment up to the map's end: records of
        # one that begins past that end go in this pass here, in the next one in Kafka.
        txns = CleanedTransactions(plan.aborted)
        to_clean = [s for s in plan.segments[:-1] if s.base_offset < result.end_offset]
        for group in group_by_size(to_clean, plan.segment_bytes):
            if should_stop():
                raise CleanAborted("stopped")
            txns.kept_aborts = []
            segment = _clean_group(store, plan, group, offset_map, last_of_producer, txns, result)
            cleaned = CleanedGroup(tuple(group), segment, tuple(txns.kept_aborts))
            written += cleaned.swap_names
            result.groups.append(cleaned)
    except (CleanAborted, FileNotFoundError) as exc:
        for name in written:
            store.unlink(name)
        raise CleanAborted(str(exc)) from None
    result.seconds = time.monotonic() - started
    return result


def _clean_group(
    store: SegmentStore,
    plan: CleanPlan,
    group: Sequence[SegmentInfo],
    offset_map: OffsetMap,
    last_of_producer: dict[int, LastOfProducer],
    txns: CleanedTransactions,
    result: CleanResult,
) -> Segment:
    cleaned = Segment.empty(group[0].base_offset, plan.index_interval_bytes)
    log_name, index_name = cleaned.log_name + CLEANED_SUFFIX, cleaned.index_name + CLEANED_SUFFIX
    store.write_new(log_name, b"")
    written = 0  # bytes of the cleaned segment already in its file
    for info in group:
        retain_deletes = info.last_modified_ms > plan.delete_horizon_ms
        out: list[bytes] = []
        for buf, h in batches(store, info):
            result.bytes_read += h.size
            data = _keep(buf, h, offset_map, retain_deletes, last_of_producer, txns, result)
            if data is None:
                continue
            kept = records.read_header(data, 0)
            cleaned.index.maybe_append(kept.base_offset, cleaned.size)
            if cleaned.size == 0 and kept.record_count:
                cleaned.rolling_timestamp = kept.max_timestamp
            if kept.record_count and kept.max_timestamp > cleaned.max_timestamp:
                cleaned.max_timestamp = kept.max_timestamp
            cleaned.size += len(data)
            cleaned.next_offset = kept.next_offset
            out.append(data)
            if cleaned.size - written >= WRITE_CHUNK_BYTES:  # memory stays bounded
                store.append_unpooled(log_name, b"".join(out))
                out, written = [], cleaned.size
        if out:
            store.append_unpooled(log_name, b"".join(out))
            written = cleaned.size
    result.bytes_written += cleaned.size
    store.write_new(index_name, cleaned.index.to_bytes())
    store.rename_unpooled(index_name, cleaned.index_name + SWAP_SUFFIX)
    if txns.kept_aborts:
        txn_name = txn_index_file_name(cleaned.base_offset) + CLEANED_SUFFIX
        store.write_new(txn_name, b"".join(a.encode() for a in txns.kept_aborts))
        store.sync_unpooled(txn_name)
        store.rename_unpooled(txn_name, txn_index_file_name(cleaned.base_offset) + SWAP_SUFFIX)
    store.sync_unpooled(log_name)
    store.set_mtime(log_name, group[-1].last_modified_ms)  # Kafka keeps the originals' time
    store.rename_unpooled(log_name, cleaned.log_name + SWAP_SUFFIX)  # last: the clean is whole
    return cleaned


def _keep(
    buf: bytes,
    h: BatchHeader,
    offset_map: OffsetMap,
    retain_deletes: bool,
    last_of_producer: dict[int, LastOfProducer],
    txns: CleanedTransactions,
    result: CleanResult,
) -> bytes | None:
    """What the cleaned segment keeps of the batch: all of it, the records it keeps, a bare
    header, or nothing (Kafka's checkBatchRetention and shouldRetainRecord)."""
    if h.attributes & CONTROL_FLAG:
        spent = txns.on_marker(h, marker_of(buf, h)) and not retain_deletes
        if not spent:
            return bytes(memoryview(buf)[h.position : h.position + h.size])
        if is_last_of_producer(last_of_producer, h):
            return empty_header(h)  # the producer's epoch stays
        result.markers_removed += 1
        return None
    if txns.on_data_batch(h):  # an aborted transaction's records go
        result.records_read += h.record_count
        return empty_header(h) if is_last_of_producer(last_of_producer, h) else None
    return _filter(buf, h, offset_map, retain_deletes, last_of_producer, result)


def _filter(
    buf: bytes,
    h: BatchHeader,
    offset_map: OffsetMap,
    retain_deletes: bool,
    last_of_producer: dict[int, LastOfProducer],
    result: CleanResult,
) -> bytes | None:
    """A data batch as it is, rewritten with the records it keeps, a bare header, or None."""
    original = bytes(memoryview(buf)[h.position : h.position + h.size])
    body, views = record_views(buf, h)
    result.records_read += len(views)
    kept = [
        r
        for r in views
        if r.offset > offset_map.latest_offset
        or (
            r.key is not None
            and r.offset >= offset_map.get(r.key)
            and (r.has_value or retain_deletes)
        )
    ]
    result.records_kept += len(kept)
    if len(kept) == len(views) and views:
        return original
    if kept:
        return rebuild(h, body, kept)
    if is_last_of_producer(last_of_producer, h):
        return empty_header(h)
    return None
