"""Rewriting a v2 batch with some of its records, as Kafka's log cleaner does
(MemoryRecords.filterTo and buildRetainedRecordsInto, Kafka 2.6). Pure.

A rewritten batch keeps its base offset, its last offset (so an idempotent producer's last
sequence survives), its producer fields, leader epoch, attributes and codec; its records are
the retained ones as they were written (their offset and timestamp deltas are relative to the
unchanged base), so a compacted batch has fewer records than offsets. A batch left with no
record may be kept as a header alone (Kafka's RETAIN_EMPTY: an active producer's last batch).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from crc32c import crc32c

from minibroker.core.compression import compress
from minibroker.core.errors import ErrorCode
from minibroker.core.records import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    BatchHeader,
    RecordError,
    records_body,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
TIMESTAMP_TYPE_FLAG = 0x08  # LogAppendTime


@dataclass(frozen=True, slots=True)
class RecordView:
    """One record of a batch: where its bytes lie in the (decompressed) body, and what the
    cleaner needs of it."""

    offset: int
    timestamp: int
    key: bytes | None
    has_value: bool
    start: int
    end: int


def _varint(body: bytes | memoryview, pos: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise IndexError("varint runs past the record")
        b = body[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return (value >> 1) ^ -(value & 1), pos
        shift += 7


def _skip_headers(body: bytes, at: int, end: int) -> int:
    """Past a record's headers, which must end the record exactly."""
    count, at = _varint(body, at, end)
    if count < 0:
        raise IndexError("a negative header count")
    for _ in range(count):
        key_len, at = _varint(body, at, end)
        if key_len < 0:
            raise IndexError("a header without a key")
        value_len, at = _varint(body, at + key_len, end)
        at += max(value_len, 0)
    if at != end:
        raise IndexError("its fields do not fill the record")
    return at


def record_views(buf: bytes | memoryview, h: BatchHeader) -> tuple[bytes, list[RecordView]]:
    """The batch's body (decompressed) and its records. Offset deltas must increase and stay
    within the batch's last offset delta (a compacted batch has gaps); RecordError
    (INVALID_RECORD) if the records do not parse (a codec error keeps its own code)."""
    body = bytes(records_body(buf, h, f"batch at offset {h.base_offset}"))
    out: list[RecordView] = []
    pos, last_delta = 0, -1
    try:
        for _ in range(h.record_count):
            length, at = _varint(body, pos, len(body))
            end = at + length
            if length < 0 or end > len(body):
                raise IndexError("record length runs past the body")
            at += 1  # attributes
            ts_delta, at = _varint(body, at, end)
            off_delta, at = _varint(body, at, end)
            if not last_delta < off_delta <= h.last_offset_delta:
                raise IndexError(f"offset delta {off_delta} out of order")
            key_len, at = _varint(body, at, end)
            key = None
            if key_len >= 0:
                key, at = body[at : at + key_len], at + key_len
            value_len, at = _varint(body, at, end)
            if key_len < -1 or value_len < -1:
                raise IndexError("a negative key or value length")
            at += max(value_len, 0)
            at = _skip_headers(body, at, end)
            log_append_time = h.attributes & TIMESTAMP_TYPE_FLAG
            ts = h.max_timestamp if log_append_time else h.base_timestamp + ts_delta
            out.append(RecordView(h.base_offset + off_delta, ts, key, value_len >= 0, pos, end))
            pos, last_delta = end, off_delta
    except IndexError as exc:
        raise RecordError(
            ErrorCode.INVALID_RECORD, f"batch at offset {h.base_offset}: {exc}"
        ) from None
    if pos != len(body):
        raise RecordError(
            ErrorCode.INVALID_RECORD, f"batch at offset {h.base_offset}: bytes after its records"
        )
    return body, out


def _batch(h: BatchHeader, attributes: int, body: bytes, count: int, max_ts: int) -> bytes:
    header = bytearray(
        _HEADER.pack(
            h.base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), h.partition_leader_epoch,
            h.magic, 0, attributes, h.last_offset_delta, h.base_timestamp, max_ts,
            h.producer_id, h.producer_epoch, h.base_sequence, count,
        )
    )  # fmt: skip
    crc = crc32c(body, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return bytes(header) + body


def rebuild(h: BatchHeader, body: bytes, kept: Sequence[RecordView]) -> bytes:
    """The batch with only `kept` of its records (in order), compressed as it was."""
    raw = b"".join(body[r.start : r.end] for r in kept)
    codec = h.attributes & COMPRESSION_MASK
    if codec:
        raw = compress(codec, raw)
    max_ts = h.max_timestamp
    if not h.attributes & TIMESTAMP_TYPE_FLAG and kept:
        max_ts = max(r.timestamp for r in kept)
    return _batch(h, h.attributes, raw, len(kept), max_ts)


def empty_header(h: BatchHeader) -> bytes:
    """The batch's header with no records (Kafka's writeEmptyHeader): it keeps a producer's
    last sequence and epoch in the log once all its records are cleaned away."""
    return _batch(h, h.attributes & ~COMPRESSION_MASK, b"", 0, h.max_timestamp)
