"""What a broker checks before it appends record batches, as Kafka's LogValidator does. Pure.

A valid CRC only says the bytes are what the sender wrote, not that they make sense: a batch
whose record count, offset range or record lengths lie would move the log end offset by the lie
and make every reader fail at it. So nothing is appended until every batch has passed:

- framing, magic 2, CRC-32C, size <= message.max.bytes (CORRUPT_MESSAGE / MESSAGE_TOO_LARGE);
- record count > 0 and equal to lastOffsetDelta + 1 (INVALID_RECORD, Kafka's validateBatch);
- a compression codec Kafka knows, and records that decompress within a bound
  (CORRUPT_MESSAGE);
- the record walk (record_walk.py): exactly `record count` well-formed records filling the body,
  with offset deltas 0..n-1 (INVALID_RECORD, as DefaultRecord.readFrom's checks).

From a client (the leader's append, Kafka's AppendOrigin.Client) also: exactly one batch per
partition (Kafka: "more than one batch"), no control batch, no transactional batch (this broker
has no transaction coordinator), a batch with a producer id has a producer epoch and base
sequence >= 0, and no LogAppendTime timestamp type (the broker's to set: Kafka 2.6 would
overwrite the attribute and recompute the CRC; this broker appends a client's bytes as sent, so
it refuses the batch instead). Producer ids are not
tracked: idempotent de-duplication is not implemented, so a retried batch may be appended twice,
as with a Kafka producer whose enable.idempotence is false.

From the leader (a follower's append, AppendOrigin.Replication) the same structural checks run
(Kafka skips the record walk there; a damaged leader log must not spread to its followers).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

from minibroker.core.batch_rewrite import record_views
from minibroker.core.errors import ErrorCode
from minibroker.core.record_walk import check_records
from minibroker.core.records import (
    ATTRIBUTES_OFFSET,
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    BatchHeader,
    RecordError,
    iter_batches,
    read_header,
    records_body,
)

TIMESTAMP_TYPE_FLAG = 0x08  # attributes bit 3: 1 = LogAppendTime
_STAMP = struct.Struct(">q")
_EPOCH = struct.Struct(">i")


def _invalid(h: BatchHeader, why: str) -> RecordError:
    return RecordError(ErrorCode.INVALID_RECORD, f"batch at byte {h.position}: {why}")


def check_batch(buf: bytes | memoryview, h: BatchHeader, *, max_batch_bytes: int) -> None:
    """The checks of every origin for one batch of `buf` whose framing passed: its size first
    (before any work proportional to it), then its CRC, header fields and records."""
    if h.size > max_batch_bytes:
        raise RecordError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"batch of {h.size} bytes exceeds message.max.bytes={max_batch_bytes}",
        )
    if crc32c(memoryview(buf)[h.position + ATTRIBUTES_OFFSET : h.position + h.size]) != h.crc:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, f"batch at byte {h.position} fails its CRC")
    if h.record_count <= 0 or h.record_count != h.last_offset_delta + 1:
        raise _invalid(
            h,
            f"record count {h.record_count} does not match last offset delta {h.last_offset_delta}",
        )
    body = records_body(buf, h, f"batch at byte {h.position}")
    failure = check_records(body, h.record_count)
    if failure is not None:
        index, why = failure
        if index < h.record_count:
            raise _invalid(h, f"record {index} of {h.record_count} is malformed: {why}")
        raise _invalid(h, f"{why} ({h.record_count})")


def _check_client_rules(h: BatchHeader, transactional: bool) -> None:
    if h.attributes & CONTROL_FLAG:
        raise _invalid(h, "clients are not allowed to write control batches")
    if h.attributes & TRANSACTIONAL_FLAG and not transactional:
        # KafkaApis.handleProduceRequest: transactional records need the request's id.
        raise RecordError(
            ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            "a transactional batch needs the produce request's transactional id",
        )
    if h.attributes & TRANSACTIONAL_FLAG and h.producer_id < 0:
        raise _invalid(h, "a transactional batch needs a producer id")
    if h.attributes & TIMESTAMP_TYPE_FLAG:
        raise _invalid(h, "timestamp type LogAppendTime is set by brokers, not clients")
    if h.producer_id >= 0 and (h.base_sequence < 0 or h.producer_epoch < 0):
        raise _invalid(
            h,
            f"producer id {h.producer_id} with producer epoch {h.producer_epoch} and base "
            f"sequence {h.base_sequence}",
        )


def validate_from_client(
    data: bytes, *, max_batch_bytes: int, transactional: bool = False
) -> BatchHeader:
    """The one batch of a client's Produce for one partition, fully checked; or RecordError."""
    if not data:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "no record batches in the request")
    headers = list(iter_batches(data))
    if len(headers) != 1:
        raise RecordError(
            ErrorCode.INVALID_RECORD,
            f"a produce request carries one batch per partition, not {len(headers)}",
        )
    h = headers[0]
    check_batch(data, h, max_batch_bytes=max_batch_bytes)
    _check_client_rules(h, transactional)
    return h


def validate_from_leader(data: bytes, *, max_batch_bytes: int) -> list[BatchHeader]:
    """The batches a follower fetched, each fully checked; or RecordError."""
    if not data:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "no record batches to append")
    headers = list(iter_batches(data))
    for h in headers:
        if h.record_count == h.last_offset_delta + 1:
            check_batch(data, h, max_batch_bytes=max_batch_bytes)
        else:
            check_compacted_batch(data, h, max_batch_bytes=max_batch_bytes)
    return headers


def check_compacted_batch(buf: bytes, h: BatchHeader, *, max_batch_bytes: int) -> None:
    """A batch the leader's log cleaner rewrote (fewer records than offsets, or none: Kafka's
    empty batch that keeps a producer's last sequence): its size, CRC, and records that parse
    with increasing offsets inside the batch."""
    if h.size > max_batch_bytes:
        raise RecordError(
            ErrorCode.MESSAGE_TOO_LARGE,
            f"batch of {h.size} bytes exceeds message.max.bytes={max_batch_bytes}",
        )
    if crc32c(memoryview(buf)[h.position + ATTRIBUTES_OFFSET : h.position + h.size]) != h.crc:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, f"batch at byte {h.position} fails its CRC")
    if not 0 <= h.record_count <= h.last_offset_delta + 1:
        raise _invalid(
            h, f"record count {h.record_count} exceeds its offsets ({h.last_offset_delta + 1})"
        )
    record_views(buf, h)


@dataclass(frozen=True)
class StampedBatches:
    data: bytes
    batches: tuple[BatchHeader, ...]

    @property
    def first_offset(self) -> int:
        return self.batches[0].base_offset

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset


def stamp(
    data: bytes, headers: Sequence[BatchHeader], *, next_offset: int, epoch: int
) -> StampedBatches:
    """The batches with consecutive offsets from `next_offset` and the leader's epoch. Only
    bytes outside the CRC'd range change, as in Kafka's in-place assignment. The stamped copy
    is made in one pass from the unchanged slices and the new fields: a mutable copy first
    costs a second megabyte-sized buffer per produced megabyte."""
    view = memoryview(data)
    parts: list[bytes | memoryview] = []
    position = 0
    offset = next_offset
    for h in headers:
        parts.append(view[position : h.position])
        parts.append(_STAMP.pack(offset))
        parts.append(view[h.position + 8 : h.position + 12])  # the batch length, unchanged
        parts.append(_EPOCH.pack(epoch))
        position = h.position + 16
        offset += h.last_offset_delta + 1
    parts.append(view[position:])
    out = b"".join(parts)
    return StampedBatches(out, tuple(read_header(out, h.position) for h in headers))


def validate_and_stamp(
    data: bytes,
    *,
    next_offset: int,
    partition_leader_epoch: int,
    max_batch_bytes: int,
    transactional: bool = False,
) -> StampedBatches:
    """The leader's append: validate a client's batch, then stamp its offsets and epoch."""
    h = validate_from_client(data, max_batch_bytes=max_batch_bytes, transactional=transactional)
    return stamp(data, [h], next_offset=next_offset, epoch=partition_leader_epoch)
