"""Taking segments out of a log and putting cleaned ones in, on the loop: retention's deletions
(the oldest segments' files renamed *.deleted, removed later off the loop, as Kafka's
asynchronous delete) and the log cleaner's swap (Kafka's Log.replaceSegments: the old segments'
files renamed *.deleted, the cleaned segment's *.swap files renamed into place). A crash
between the renames leaves files recovery.py finishes or discards.

A part of Log (its base class), kept apart so each file has one job."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from broker.log.retention import SegmentView
from broker.log.segment import Segment, txn_index_file_name
from broker.log.store import DELETED_SUFFIX, SegmentStore
from broker.log.txn_index import AbortedTxn

SWAP_SUFFIX = ".swap"
CLEANED_SUFFIX = ".cleaned"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """A segment as the cleaner reads it in its thread: a copy, not the log's own object."""

    base_offset: int
    size: int
    next_offset: int
    log_name: str
    largest_timestamp_ms: int  # retention's view: the largest record timestamp, or the mtime
    rolling_timestamp_ms: int  # the first batch's timestamp (-1 for none)
    last_modified_ms: int


class SegmentReplacement:
    _segments: list[Segment]
    _store: SegmentStore
    _dirty: set[int]
    _index_interval_bytes: int
    _aborted: dict[int, list[AbortedTxn]]  # a segment's .txnindex entries (log_txns.py)

    @property
    def index_interval_bytes(self) -> int:
        """Bytes between index entries (the cleaner writes its indexes with the same)."""
        return self._index_interval_bytes

    def retention_views(self) -> list[SegmentView]:
        """What the retention rule needs of each segment (retention.py)."""
        return [s.retention_view(self._store) for s in self._segments]

    def segment_infos(self) -> list[SegmentInfo]:
        """Every segment, oldest first, the last one active."""
        out = []
        for s in self._segments:
            view = s.retention_view(self._store)
            mtime = self._store.mtime_ms(s.log_name)
            out.append(
                SegmentInfo(
                    s.base_offset,
                    s.size,
                    s.next_offset,
                    s.log_name,
                    view.largest_timestamp_ms,
                    s.rolling_timestamp,
                    mtime,
                )  # fmt: skip
            )
        return out

    def retire_oldest(self, count: int) -> list[str]:
        """Take the `count` oldest segments out of the log (never the last one: roll first)
        and rename their files to *.deleted, giving their names: the caller removes them
        later, off the loop (Kafka's asynchronous delete after file.delete.delay.ms)."""
        if not 0 <= count < len(self._segments):
            raise ValueError(f"cannot retire {count} of {len(self._segments)} segments")
        retired = self._retire(self._segments[:count])
        del self._segments[:count]
        return retired

    def _retire(self, segments: Sequence[Segment]) -> list[str]:
        retired: list[str] = []
        for segment in segments:
            names = [segment.log_name, segment.index_name]
            if self._aborted.pop(segment.base_offset, None) is not None:
                names.append(txn_index_file_name(segment.base_offset))  # only where entries are
            for name in names:
                self._store.retire(name)
                retired.append(name + DELETED_SUFFIX)
            self._dirty.discard(segment.base_offset)
        return retired

    def unlink_retired(self, names: Sequence[str]) -> None:
        """Remove files retire_oldest or swap_in renamed (in a worker thread)."""
        for name in names:
            self._store.unlink(name)

    def swap_in(
        self,
        replaced: Sequence[SegmentInfo],
        cleaned: Segment,
        aborted: Sequence[AbortedTxn] = (),
    ) -> list[str] | None:
        """Replace the segments `replaced` (as the cleaner read them) by `cleaned`, whose
        files wait as <base>.log.swap and <base>.index.swap, with <base>.txnindex.swap holding
        `aborted` if any: the old files are renamed *.deleted (their names returned, to remove
        later), the swap files into place, the log's first (recovery.py finishes a swap cut
        short from there). None, and nothing changed, if the log no longer holds those
        segments as they were (retention or truncation ran meanwhile)."""
        bases = [r.base_offset for r in replaced]
        at = next((i for i, s in enumerate(self._segments) if s.base_offset == bases[0]), None)
        if at is None or at + len(bases) >= len(self._segments):  # never the active segment
            return None
        current = self._segments[at : at + len(bases)]
        if [(s.base_offset, s.size, s.next_offset) for s in current] != [
            (r.base_offset, r.size, r.next_offset) for r in replaced
        ]:
            return None
        retired = self._retire(current)
        names = [cleaned.log_name, cleaned.index_name]
        if aborted:
            names.append(txn_index_file_name(cleaned.base_offset))
        if cleaned.size == 0 and at > 0:
            # Nothing left and not the first segment (which holds the log start): no segment.
            self._segments[at : at + len(bases)] = []
            return retired + [name + SWAP_SUFFIX for name in names]
        for name in names:
            self._store.rename(name + SWAP_SUFFIX, name)
        self._segments[at : at + len(bases)] = [cleaned]
        if aborted:
            self._aborted[cleaned.base_offset] = list(aborted)
        return retired
