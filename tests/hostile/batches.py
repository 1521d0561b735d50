"""Record batches a hostile client sends: CRC right, contents lying. Each variant names the Kafka
error a broker must answer with; the unit tests feed them to the validator and the live barrage
sends them to a real cluster.

Built field by field here (not with the codec under test), so a mistake shared by the codec's
writer and reader cannot hide.
"""

from __future__ import annotations

import functools
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass

from crc32c import crc32c

from minibroker.core import compression
from minibroker.core.errors import ErrorCode

HEADER = struct.Struct(">qiibIhiqqqhii")
CONTROL_FLAG = 0x20
TRANSACTIONAL_FLAG = 0x10
LOG_APPEND_TIME_FLAG = 0x08

# Batches stamped now: retention deletes records older than retention.ms (a week).
NOW_MS = int(time.time() * 1000)


def varint(value: int) -> bytes:
    """Kafka's zigzag varint, written independently of minibroker.core.records."""
    v = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def field(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def record(
    index: int,
    *,
    key: bytes | None = None,
    value: bytes | None = b"v",
    headers: tuple[tuple[bytes, bytes | None], ...] = (),
    offset_delta: int | None = None,
    raw_after_offset: bytes | None = None,
    length_delta: int = 0,
) -> bytes:
    """One record; `raw_after_offset` replaces everything after the offset delta (key, value,
    headers) with raw bytes, `length_delta` makes the length prefix lie."""
    body = b"\x00" + varint(0) + varint(index if offset_delta is None else offset_delta)
    if raw_after_offset is not None:
        body += raw_after_offset
    else:
        body += field(key) + field(value) + varint(len(headers))
        body += b"".join(field(k) + field(v) for k, v in headers)
    return varint(len(body) + length_delta) + body


def batch(
    body: bytes,
    *,
    record_count: int,
    last_offset_delta: int | None = None,
    attributes: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
) -> bytes:
    """A v2 batch around `body` with a correct CRC, whatever the other fields say."""
    delta = record_count - 1 if last_offset_delta is None else last_offset_delta
    header = HEADER.pack(
        0, 49 + len(body), -1, 2, 0, attributes, delta, NOW_MS,
        NOW_MS, producer_id, producer_epoch, base_sequence, record_count,
    )  # fmt: skip
    out = bytearray(header + body)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def records(n: int) -> bytes:
    return b"".join(record(i, value=b"value-%d" % i) for i in range(n))


def good(n: int = 3) -> bytes:
    return batch(records(n), record_count=n)


def compressed(codec: int, n: int = 3) -> bytes:
    return batch(compression.compress(codec, records(n)), record_count=n, attributes=codec)


@dataclass(frozen=True)
class Variant:
    name: str
    make: Callable[[], bytes]
    code: ErrorCode


def _raw_fields(raw: bytes) -> bytes:
    """One record whose key, value and headers are `raw` bytes."""
    return batch(record(0, raw_after_offset=raw), record_count=1)


def _one(**fields: int) -> bytes:
    """One good record in a batch with the given header fields."""
    return batch(records(1), record_count=1, **fields)


def _pid(**fields: int) -> bytes:
    return _one(producer_id=7, **fields)


@functools.cache
def _gzip_bomb() -> bytes:
    """100 MiB of zeros as a ~100 KiB gzip body (made once: compressing takes a moment)."""
    return batch(compression.compress(1, bytes(100 << 20)), record_count=1, attributes=1)


def _flip_last(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 1])


def _variants() -> list[Variant]:
    r = ErrorCode.INVALID_RECORD
    c = ErrorCode.CORRUPT_MESSAGE
    t = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # no transactional id in the request
    nul, val = field(None), field(b"v")
    gz = compression.compress
    v, b = Variant, batch
    return [
        # The reproduction: 3 records, record count 2, last offset delta 1.
        v("count-one-less", lambda: b(records(3), record_count=2), r),
        v("count-one-more", lambda: b(records(3), record_count=4), r),
        v("count-1e9", lambda: b(records(3), record_count=10**9), r),
        v("count-int32-max", lambda: b(records(3), record_count=2**31 - 1), r),
        v("count-zero", lambda: b(b"", record_count=0), r),
        v("count-negative", lambda: b(records(1), record_count=-1), r),
        v("delta-disagrees", lambda: b(records(3), record_count=3, last_offset_delta=5), r),
        v("delta-int32-max", lambda: b(records(3), record_count=3, last_offset_delta=2**31 - 1), r),
        v("offset-deltas-repeat", lambda: b(REPEATED_DELTA, record_count=2), r),
        v("length-negative", lambda: b(record(0, length_delta=-100), record_count=1), r),
        v("length-too-long", lambda: b(record(0, length_delta=1), record_count=1), r),
        v("length-too-short", lambda: b(record(0, length_delta=-1), record_count=1), r),
        v("length-1e9", lambda: b(varint(10**9) + b"\x00" * 8, record_count=1), r),
        v("header-count-minus-2", lambda: _raw_fields(nul + val + varint(-2)), r),
        v("header-count-1e9", lambda: _raw_fields(nul + val + varint(10**9)), r),
        v("header-key-null", lambda: _raw_fields(nul + val + varint(1) + nul + val), r),
        v("value-length-oversized", lambda: _raw_fields(nul + varint(2**31 - 1) + b"v\x00"), r),
        v("key-length-minus-5", lambda: _raw_fields(varint(-5) + val + varint(0)), r),
        v("varint-unterminated", lambda: b(b"\x0c\x00" + b"\xff" * 11, record_count=1), r),
        v("varint-unterminated-at-end", lambda: b(records(1) + b"\x80", record_count=2), r),
        v("two-batches", lambda: good(2) + good(1), r),
        v("control-batch", lambda: _one(attributes=CONTROL_FLAG), r),
        v("transactional", lambda: _pid(attributes=TXN, producer_epoch=0, base_sequence=0), t),
        v("log-append-time", lambda: _one(attributes=LOG_APPEND_TIME_FLAG), r),
        v("producer-id-negative-sequence", lambda: _pid(producer_epoch=0, base_sequence=-5), r),
        v("producer-id-negative-epoch", lambda: _pid(producer_epoch=-1, base_sequence=0), r),
        v("codec-5", lambda: _one(attributes=5), c),
        v("codec-7", lambda: _one(attributes=7), c),
        v("gzip-garbage", lambda: b(b"\x1f\x8b garbage", record_count=1, attributes=1), c),
        v("gzip-truncated", lambda: b(compressed(1)[61:-4], record_count=3, attributes=1), c),
        v("snappy-garbage", lambda: b(b"\xff\xff\xff\x0f junk", record_count=1, attributes=2), c),
        v("snappy-xerial-garbage", lambda: b(XERIAL_GARBAGE, record_count=1, attributes=2), c),
        v("lz4-garbage", lambda: b(b"\x04\x22\x4d\x18 garbage", record_count=1, attributes=3), c),
        v("zstd-garbage", lambda: b(b"\x28\xb5\x2f\xfd garbage", record_count=1, attributes=4), c),
        v("gzip-bomb", _gzip_bomb, c),
        v("gzip-count-lies", lambda: b(gz(1, records(3)), record_count=2, attributes=1), r),
        v("crc-wrong", lambda: _flip_last(good()), c),
        v("magic-3", lambda: good()[:16] + b"\x03" + good()[17:], c),
        v("truncated", lambda: good()[:-3], c),
        v("empty", lambda: b"", c),
    ]  # fmt: skip


REPEATED_DELTA = record(0) + record(1, offset_delta=0)
TXN = TRANSACTIONAL_FLAG
XERIAL_GARBAGE = b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 + b"\x00\x00\x00\x09garbage!!"
VARIANTS: list[Variant] = _variants()
