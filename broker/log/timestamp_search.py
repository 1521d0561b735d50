"""ListOffsets by timestamp over a log's segments, as Kafka 2.6 finds it: the first segment whose
largest timestamp reaches the target (Log.fetchOffsetByTimestamp), and in it the first *record*,
not batch, whose timestamp reaches the target at or after the log start offset
(LogSegment.findOffsetByTimestamp, FileRecords.searchForTimestamp). A batch's records can carry
any timestamps, so its first offset is not the answer when its earlier records are older.

A part of Log (its base class), kept apart so each file has one job."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from broker.log.segment import Segment
from broker.log.segment_reads import headers as segment_headers
from broker.log.store import SegmentStore
from minibroker.core.batch_validation import TIMESTAMP_TYPE_FLAG
from minibroker.core.records import BatchHeader, decode_batch


@dataclass(frozen=True, slots=True)
class TimestampAndOffset:
    """Kafka's TimestampAndOffset: the record found, and its batch's partition leader epoch
    (-1 when the batch carries none)."""

    timestamp: int
    offset: int
    leader_epoch: int


def search_for_timestamp(
    store: SegmentStore, segment: Segment, target_timestamp: int, starting_offset: int
) -> TimestampAndOffset | None:
    """The first record of `segment` at or after `starting_offset` whose timestamp is >= the
    target: the batches whose max timestamp reaches it are opened in order (those below it
    cannot hold it); None when none of this segment's records qualify."""
    position = segment.index.lookup(max(starting_offset, segment.base_offset))
    for h in segment_headers(store, segment, position):
        if h.max_timestamp < target_timestamp or h.last_offset < starting_offset:
            continue
        found = _first_record_at_or_after(store, segment, h, target_timestamp, starting_offset)
        if found is not None:
            return found
    return None


def _first_record_at_or_after(
    store: SegmentStore, segment: Segment, h: BatchHeader, target: int, starting_offset: int
) -> TimestampAndOffset | None:
    buf = store.read(segment.log_name, h.position, h.size)
    # With LogAppendTime every record's timestamp is the batch's (DefaultRecordBatch).
    log_append_time = bool(h.attributes & TIMESTAMP_TYPE_FLAG)
    for record in decode_batch(buf, dataclasses.replace(h, position=0)):
        timestamp = h.max_timestamp if log_append_time else record.timestamp
        if timestamp >= target and record.offset >= starting_offset:
            return TimestampAndOffset(timestamp, record.offset, h.partition_leader_epoch)
    return None


class TimestampSearch:
    _segments: list[Segment]
    _store: SegmentStore
    _log_start_offset: int

    def fetch_offset_by_timestamp(self, target_timestamp: int) -> TimestampAndOffset | None:
        """Kafka's Log.fetchOffsetByTimestamp for a timestamp >= 0: only the first segment
        whose largest timestamp reaches the target is searched, as Kafka does. RecordError
        if the batch to read is corrupt."""
        segment = next((s for s in self._segments if s.max_timestamp >= target_timestamp), None)
        if segment is None:
            return None
        return search_for_timestamp(self._store, segment, target_timestamp, self._log_start_offset)

    def batches(self) -> list[BatchHeader]:
        """Every batch header in the log, positions relative to its segment (diagnostics)."""
        return [h for segment in self._segments for h in segment_headers(self._store, segment)]
