"""Opening a partition's files after any stop, clean or not: keep the longest run of whole,
CRC-valid, contiguous batches from the first segment on and remove everything after the first
flaw (torn tail, garbled bytes, offset gap); never trust an index or a leader-epoch checkpoint
that disagrees with the batches. Every repair is written down as one sentence.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, CheckpointError, parse_epochs
from broker.log.index import ENTRY_SIZE
from broker.log.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TXN_INDEX_SUFFIX,
    Segment,
    base_offset_of,
    delete_segment_files,
    index_file_name,
    segment_file_name,
    txn_index_file_name,
)
from broker.log.segment_replacement import CLEANED_SUFFIX, SWAP_SUFFIX
from broker.log.store import DELETED_SUFFIX, SegmentStore
from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from minibroker.core import records
from minibroker.core.records import HEADER_SIZE, LOG_OVERHEAD, BatchHeader

# Recovery reads a segment in chunks of this size, so a 1 GiB segment is never in memory whole.
RECOVERY_CHUNK_BYTES = 4 << 20


@dataclass
class Recovered:
    segments: list[Segment] = field(default_factory=list)
    # What opening the log had to repair, one sentence each (the broker logs them).
    repairs: list[str] = field(default_factory=list)
    # The leader epochs the batches carry: (epoch, first offset) where each epoch starts.
    batch_epochs: list[EpochEntry] = field(default_factory=list)

    gap_horizon: int = 0

    @property
    def log_end_offset(self) -> int:
        return self.segments[-1].next_offset

    def continues(self, expected: int, base_offset: int) -> bool:
        """Whether a batch (or segment) at `base_offset` may follow one ending at `expected`."""
        return base_offset == expected or expected < base_offset <= self.gap_horizon


def recover_segments(
    store: SegmentStore, index_interval_bytes: int, log_start_offset: int = 0, gap_horizon: int = 0
) -> Recovered:
    """The valid segments in order (none for an empty store), files cut to match; none either
    when they end below the checkpointed log start offset (Kafka's loadSegments: segment files
    removed behind the broker's back), whose files are deleted.

    Offsets must continue one another, except for the gaps compaction leaves: a gap is taken
    only where it ends at or below `gap_horizon` (the log's cleaner-offset-checkpoint entry:
    how far it was cleaned, or took a cleaned leader's batches). Above it a gap is a flaw: a
    crash that lost a segment's tail but not the next segment's head."""
    out = Recovered(gap_horizon=gap_horizon)
    names = store.list()
    # Files renamed for deletion before the broker stopped (Kafka's recovery deletes them too).
    retired = [n for n in names if n.endswith(DELETED_SUFFIX)]
    for name in retired:
        store.delete(name)
    if _finish_interrupted_clean(store, names, out) or retired:
        names = store.list()
    bases = sorted(b for n in names if (b := base_offset_of(n, LOG_SUFFIX)) is not None)
    for name in names:
        # An index without its segment is left over from a deletion cut short.
        base = base_offset_of(name, INDEX_SUFFIX)
        if base is not None and base not in bases:
            store.delete(name)
    for i, base in enumerate(bases):
        # Offsets increase; a compacted log has gaps between segments (and inside them).
        if out.segments and not out.continues(out.log_end_offset, base):
            out.repairs.append(
                f"deleted segments {bases[i:]}: they do not continue the log at offset "
                f"{out.log_end_offset}"
            )
            delete_segment_files(store, bases[i:])
            break
        segment = _recover_segment(store, base, index_interval_bytes, out)
        out.segments.append(segment)
        stored = store.size(segment.log_name)
        if segment.size < stored:
            later = bases[i + 1 :]
            out.repairs.append(
                f"{segment.log_name}: truncated from {stored} to {segment.size} bytes at offset "
                f"{segment.next_offset} (a torn or corrupt batch)"
                + (f"; deleted the segments after it {later}" if later else "")
            )
            store.truncate(segment.log_name, segment.size)
            delete_segment_files(store, later)
            break
    if out.segments and out.log_end_offset < log_start_offset:
        out.repairs.append(
            f"deleted every segment: the log end offset {out.log_end_offset} is below the "
            f"checkpointed log start offset {log_start_offset}"
        )
        delete_segment_files(store, [s.base_offset for s in out.segments])
        out.segments.clear()
        out.batch_epochs.clear()
    return out


def _finish_interrupted_clean(store: SegmentStore, names: list[str], out: Recovered) -> bool:
    """Kafka's Log.loadSegments for a clean cut short: *.cleaned files (a clean not finished)
    are deleted; a <base>.log.swap (cleaned, not yet swapped in) replaces the segments its
    offsets cover and becomes <base>.log, and its <base>.txnindex.swap <base>.txnindex.
    Whether any file changed."""
    changed = False
    for name in names:
        if name.endswith(CLEANED_SUFFIX):
            store.delete(name)
            out.repairs.append(f"{name}: deleted (a clean the broker stopped in)")
            changed = True
    for name in names:
        base = base_offset_of(name.removesuffix(SWAP_SUFFIX), LOG_SUFFIX)
        if not name.endswith(SWAP_SUFFIX) or base is None:
            continue
        end = base + 1
        for _, h in _scan_valid(store, name):
            end = max(end, h.next_offset)
        replaced = [
            b for n in names if (b := base_offset_of(n, LOG_SUFFIX)) is not None and base <= b < end
        ]
        delete_segment_files(store, replaced)
        store.rename_unpooled(name, segment_file_name(base))
        store.delete(index_file_name(base) + SWAP_SUFFIX)
        out.repairs.append(
            f"{name}: swapped in for segments {replaced} (a clean the broker stopped in)"
        )
        changed = True
    left = set(store.list())
    for name in names:  # an index swap file without its log swap file
        if name.endswith(INDEX_SUFFIX + SWAP_SUFFIX) and name in left:
            store.delete(name)
        base = base_offset_of(name.removesuffix(SWAP_SUFFIX), TXN_INDEX_SUFFIX)
        if name.endswith(SWAP_SUFFIX) and base is not None and name in left:
            # The cleaned segment's aborted transactions. Its log is in place (renamed above,
            # or by the swap the broker stopped in) unless the clean itself was cut short.
            cut_short = segment_file_name(base) + CLEANED_SUFFIX in names
            if cut_short or segment_file_name(base) not in left:
                store.delete(name)
            else:
                store.rename_unpooled(name, txn_index_file_name(base))
            changed = True
    return changed


def _recover_segment(
    store: SegmentStore, base_offset: int, index_interval_bytes: int, out: Recovered
) -> Segment:
    """The segment's valid prefix (its file is not cut here) with a rebuilt index."""
    segment = Segment.empty(base_offset, index_interval_bytes)
    for position, h in _scan_valid(store, segment.log_name):
        if not out.continues(segment.next_offset, h.base_offset):
            break
        segment.index.maybe_append(h.base_offset, position)
        segment.note_batch(h.max_timestamp)
        segment.size = position + h.size
        segment.next_offset = h.next_offset
        epoch = h.partition_leader_epoch
        if epoch >= 0 and (not out.batch_epochs or epoch > out.batch_epochs[-1].epoch):
            out.batch_epochs.append(EpochEntry(epoch, h.base_offset))
    # The index is never trusted: it is rebuilt from the batches and rewritten if it differs
    # (missing, torn, garbled, or pointing past the segment).
    index_bytes = segment.index.to_bytes()
    stored = store.read(segment.index_name, 0, len(index_bytes) + ENTRY_SIZE)
    if stored != index_bytes:
        if stored or index_bytes:
            out.repairs.append(f"{segment.index_name}: rebuilt from the segment")
        store.write_atomic(segment.index_name, index_bytes)
    return segment


def _scan_valid(store: SegmentStore, name: str) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of the whole, CRC-valid batches at the start of file `name`."""
    size = store.size(name)
    position = 0
    while position < size:
        chunk = store.read(name, position, RECOVERY_CHUNK_BYTES)
        length, headers = records.valid_prefix(chunk)
        if length == 0:
            # Either a flaw here, or one batch larger than a chunk: read exactly that batch.
            length, headers = _valid_large_batch(store, name, position, chunk, size)
            if length == 0:
                return
        for h in headers:
            yield position + h.position, h
        position += length


def _valid_large_batch(
    store: SegmentStore, name: str, position: int, chunk: bytes, file_size: int
) -> tuple[int, list[BatchHeader]]:
    if len(chunk) < HEADER_SIZE:
        return 0, []
    h = records.read_header(chunk, 0)
    if h.size <= len(chunk) or h.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        return 0, []  # it fitted in the chunk, so it failed on its own: a flaw
    if position + h.size > file_size:
        return 0, []  # torn: the file ends inside it
    return records.valid_prefix(store.read(name, position, h.size))


def load_epochs(store: SegmentStore, recovered: Recovered) -> tuple[list[EpochEntry], bool]:
    """The leader-epoch checkpoint's entries, which may name epochs no batch carries (a leader
    that appended nothing); if it is missing while batches carry epochs, unreadable, or not
    strictly increasing, the epochs the batches carry instead. Also whether it was rebuilt
    (the caller then writes it anew)."""
    size = store.size(LEADER_EPOCH_CHECKPOINT)
    if not size:
        if not recovered.batch_epochs:
            return [], False
        why = "missing"
    else:
        try:
            entries = parse_epochs(store.read(LEADER_EPOCH_CHECKPOINT, 0, size))
            LeaderEpochCache(entries)  # raises unless epochs and offsets strictly increase
            if any(e.epoch < 0 or e.start_offset < 0 for e in entries):
                raise CheckpointError("a negative epoch or start offset")
        except (CheckpointError, ValueError) as exc:
            why = f"unreadable ({exc})"
        else:
            # The broker writes the file after the change (epoch_checkpoints.py): a crash in
            # between leaves it without the newest epochs, which the batches still carry.
            last = entries[-1] if entries else None
            newer = [
                e
                for e in recovered.batch_epochs
                if last is None or (e.epoch > last.epoch and e.start_offset > last.start_offset)
            ]
            if not newer:
                return entries, False
            recovered.repairs.append(
                f"{LEADER_EPOCH_CHECKPOINT}: behind the log; added epochs "
                + ", ".join(f"{e.epoch}@{e.start_offset}" for e in newer)
                + " from its batches"
            )
            return entries + newer, True
    recovered.repairs.append(
        f"{LEADER_EPOCH_CHECKPOINT}: {why}; rebuilt from the batches' leader epochs"
    )
    return list(recovered.batch_epochs), True
