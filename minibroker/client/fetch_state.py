"""The consumer's per-partition positions and what a fetched chunk or error does to them; pure.
A fetch answer moves a position only if it is still the offset fetched: after a seek it is
stale and dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from minibroker.core.control_records import marker_of
from minibroker.core.errors import REFRESH_METADATA, RETRIABLE, ErrorCode
from minibroker.core.records import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    Record,
    RecordError,
    decode_batch,
    iter_batches,
)
from minibroker.core.types import TopicPartition

OffsetReset = Literal["earliest", "latest", "none"]
# ListOffsets timestamps with a special meaning (Kafka's ListOffsetsRequest constants).
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2


def reset_timestamp(strategy: OffsetReset) -> int:
    if strategy == "none":
        raise ValueError("no reset timestamp for auto_offset_reset='none'")
    return EARLIEST_TIMESTAMP if strategy == "earliest" else LATEST_TIMESTAMP


@dataclass(frozen=True)
class ConsumerRecord:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass
class PartitionState:
    """`position` is the next offset to fetch; None until seeked or reset."""

    position: int | None = None
    reset: OffsetReset | None = None
    high_watermark: int = -1
    log_start_offset: int = -1
    backoff_until_ms: int = 0


class ErrorAction(Enum):
    REFRESH_METADATA = "refresh_metadata"
    RESET_OFFSET = "reset_offset"
    BACKOFF = "backoff"
    RAISE = "raise"


def fetch_error_action(code: ErrorCode, auto_offset_reset: OffsetReset) -> ErrorAction:
    """What a partition's Fetch error means (Kafka's Fetcher.initializeCompletedFetch)."""
    if code is ErrorCode.OFFSET_OUT_OF_RANGE:
        return ErrorAction.RAISE if auto_offset_reset == "none" else ErrorAction.RESET_OFFSET
    if code in REFRESH_METADATA or code in (
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
    ):
        return ErrorAction.REFRESH_METADATA
    if code in RETRIABLE and code is not ErrorCode.CORRUPT_MESSAGE:
        return ErrorAction.BACKOFF
    return ErrorAction.RAISE


def committed_only(
    data: bytes, headers: list[BatchHeader], aborted: list[tuple[int, int]] | None
) -> list[BatchHeader]:
    """The data batches a consumer returns: never a control batch (a COMMIT/ABORT marker); with
    `aborted` (read_committed: the fetch's aborted transactions, producer id and first offset),
    not a transactional batch of an aborted transaction either (Kafka's Fetcher: a producer is
    aborted from its aborted transaction's first offset until its ABORT marker)."""
    pending = sorted(aborted or [], key=lambda a: a[1])
    aborting: set[int] = set()
    kept = []
    for h in headers:
        while pending and pending[0][1] <= h.last_offset:
            aborting.add(pending.pop(0)[0])
        if h.attributes & CONTROL_FLAG:
            if h.producer_id in aborting and _is_abort(data, h):
                aborting.discard(h.producer_id)
            continue
        if aborted is not None and h.attributes & TRANSACTIONAL_FLAG and h.producer_id in aborting:
            continue
        kept.append(h)
    return kept


def _is_abort(data: bytes, h: BatchHeader) -> bool:
    marker = marker_of(data, h)
    return marker is not None and not marker.commit  # unreadable: the producer stays aborted


def records_from(
    data: bytes, fetch_offset: int, aborted: list[tuple[int, int]] | None = None
) -> tuple[list[Record], int | None]:
    """The records at or after `fetch_offset` in fetched bytes, and the position after them
    (None when no batch ends past `fetch_offset`).

    The first batch may start before `fetch_offset`; batches that end before it are skipped
    without decoding. CRCs and record framing are checked, as Kafka's consumer does by default.
    A damaged batch never costs the good ones before it, nor is it skipped: the records before
    it are returned and the position stops at it, so the next fetch starts with it and raises
    RecordError naming its offset (Kafka's consumer: "seek past the record to continue").
    """
    headers: list[BatchHeader] = []
    try:
        for h in iter_batches(data, verify_crc=True):
            if h.next_offset > fetch_offset:
                headers.append(h)
    except RecordError:
        if not headers:
            raise
    out: list[Record] = []
    end = headers[-1].next_offset if headers else None
    for h in committed_only(data, headers, aborted):
        try:
            records = decode_batch(data, h)
        except RecordError:
            if not out:
                raise
            return out, h.base_offset
        if h.base_offset < fetch_offset:
            records = [r for r in records if r.offset >= fetch_offset]
        out.extend(records)
    return out, end


class SubscriptionState:
    """Assigned partitions and their fetch positions."""

    def __init__(self, auto_offset_reset: OffsetReset = "earliest") -> None:
        self.auto_offset_reset: OffsetReset = auto_offset_reset
        self._parts: dict[TopicPartition, PartitionState] = {}

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Replace the assignment; partitions that stay keep their positions."""
        wanted = list(dict.fromkeys(tps))
        self._parts = {tp: self._parts.get(tp) or PartitionState() for tp in wanted}

    def assigned(self) -> list[TopicPartition]:
        return list(self._parts)

    def is_assigned(self, tp: TopicPartition) -> bool:
        return tp in self._parts

    def state(self, tp: TopicPartition) -> PartitionState:
        try:
            return self._parts[tp]
        except KeyError:
            raise ValueError(f"partition {tp} is not assigned") from None

    def seek(self, tp: TopicPartition, offset: int) -> None:
        if offset < 0:
            raise ValueError(f"cannot seek {tp} to negative offset {offset}")
        st = self.state(tp)
        st.position = offset
        st.reset = None

    def request_reset(self, tp: TopicPartition, strategy: OffsetReset) -> None:
        self.state(tp).reset = strategy

    def position(self, tp: TopicPartition) -> int | None:
        return self.state(tp).position

    def needs_reset(self) -> dict[TopicPartition, OffsetReset]:
        """Partitions whose position must come from ListOffsets, with the strategy to use."""
        out: dict[TopicPartition, OffsetReset] = {}
        for tp, st in self._parts.items():
            if st.reset is not None:
                out[tp] = st.reset
            elif st.position is None:
                out[tp] = self.auto_offset_reset
        return out

    def fetchable(self, now_ms: int) -> list[TopicPartition]:
        return [
            tp
            for tp, st in self._parts.items()
            if st.position is not None and st.reset is None and now_ms >= st.backoff_until_ms
        ]

    def back_off(self, tp: TopicPartition, until_ms: int) -> None:
        if tp in self._parts:
            self._parts[tp].backoff_until_ms = until_ms

    def next_backoff_end(self, now_ms: int) -> int | None:
        """The earliest end of a running backoff, if any partition is backing off."""
        ends = [st.backoff_until_ms for st in self._parts.values() if st.backoff_until_ms > now_ms]
        return min(ends, default=None)

    def apply_fetched(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        data: bytes,
        high_watermark: int,
        log_start_offset: int,
        aborted: list[tuple[int, int]] | None = None,
    ) -> list[ConsumerRecord]:
        """Take in one partition's fetched bytes: the records from `fetch_offset` on, with the
        position moved past them. Nothing if the position moved since the fetch was sent."""
        st = self._parts.get(tp)
        if st is None or st.position != fetch_offset or st.reset is not None:
            return []
        st.high_watermark = high_watermark
        st.log_start_offset = log_start_offset
        records, next_offset = records_from(data, fetch_offset, aborted)
        if next_offset is not None:
            st.position = max(fetch_offset, next_offset)
        return [
            ConsumerRecord(tp.topic, tp.partition, r.offset, r.timestamp, r.key, r.value, r.headers)
            for r in records
        ]
