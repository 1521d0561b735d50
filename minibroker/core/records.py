"""Kafka's v2 RecordBatch format (magic 2): build, iterate headers, decode; pure.

Layout of a batch (big-endian), 61 header bytes then the records:

    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 (CRC-32C over attributes..end) | 21 attributes int16 | 23 lastOffsetDelta int32
    27 baseTimestamp int64 | 35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16
    53 baseSequence int32 | 57 recordCount int32 | 61 records...

baseOffset and partitionLeaderEpoch sit before the CRC'd range, so the broker stamps them
without recomputing the CRC — exactly what Kafka's leader does. What a broker checks before an
append is in batch_validation.py; records are decoded by clients.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from crc32c import crc32c

from minibroker.core.compression import CompressionError, check_codec, decompress
from minibroker.core.errors import ErrorCode
from minibroker.core.record_walk import check_records

MAGIC = 2
HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part batchLength does not count
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
NO_PARTITION_LEADER_EPOCH = -1
NO_PRODUCER_ID = -1
COMPRESSION_MASK = 0x07
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == HEADER_SIZE


class RecordError(ValueError):
    """Bytes that are not valid record batches; `code` is the Kafka error to answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class BatchHeader:
    """One batch's header fields and where the batch sits in the buffer it was read from."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes of the whole batch, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK


@dataclass(frozen=True)
class Record:
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


# ---- varints (zigzag, as Kafka's ByteUtils) ---------------------------------------------------


def _write_varint(out: bytearray, value: int) -> None:
    v = (value << 1) ^ (value >> 63)  # zigzag for 64-bit values
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _encode_varint(value: int) -> bytes:
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


_SMALL_VARINT_LIMIT = 1 << 14  # the table of ready-made encodings covers 0 .. 16383
_SMALL_VARINTS = tuple(_encode_varint(v) for v in range(_SMALL_VARINT_LIMIT))
_NULL = _encode_varint(-1)


def _varint(value: int) -> bytes:
    """The zigzag varint of `value` as bytes (a table lookup for small non-negative values)."""
    if 0 <= value < _SMALL_VARINT_LIMIT:
        return _SMALL_VARINTS[value]
    return _encode_varint(value)


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        if pos >= len(buf):
            raise RecordError(ErrorCode.CORRUPT_MESSAGE, "record ends inside a varint")
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise RecordError(ErrorCode.CORRUPT_MESSAGE, "varint longer than 10 bytes")
    if raw >> 64:
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "varint beyond 64 bits")
    return (raw >> 1) ^ -(raw & 1), pos


def _read_bytes(buf: bytes | memoryview, pos: int) -> tuple[bytes | None, int]:
    n, pos = _read_varint(buf, pos)
    if n < 0:
        return None, pos
    if pos + n > len(buf):
        raise RecordError(ErrorCode.CORRUPT_MESSAGE, "record field runs past the batch")
    return bytes(buf[pos : pos + n]), pos + n


# ---- building (clients) -----------------------------------------------------------------------


class NewRecord(NamedTuple):
    """A record as a producer hands it over (a named tuple: clients make one per record)."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None  # None = the batch's base timestamp


# A NewRecord's fields as a plain tuple: the producer buffers its records this way, because
# the garbage collector stops tracking a plain tuple of bytes and ints after one look, where it
# would scan a named tuple (a subclass) on every full collection for as long as it is buffered.
RecordFields = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int | None]


def encode_records_py(records: Sequence[RecordFields], base_timestamp: int) -> tuple[bytes, int]:
    """The records of a batch body at offset deltas 0..n-1, and their largest timestamp (a
    record without one has the base timestamp). The reference for the C encoder."""
    # Kafka's maxTimestamp is the largest record timestamp, which may be below the base.
    max_ts = max((base_timestamp if rec[3] is None else rec[3] for rec in records),
                 default=base_timestamp)  # fmt: skip
    # Small varints come from a table and each record is one join of its parts (about 3x
    # faster than appending varints byte by byte).
    parts: list[bytes] = []
    for delta, (key, value, headers, ts) in enumerate(records):
        fields = [
            b"\x00",  # record attributes (unused)
            _varint(0 if ts is None else ts - base_timestamp),
            _varint(delta),
            _NULL if key is None else _varint(len(key)) + key,
            _NULL if value is None else _varint(len(value)) + value,
            _varint(len(headers)),
        ]
        for hkey, hval in headers:
            name = hkey.encode("utf-8")
            fields.append(_varint(len(name)) + name)
            fields.append(_NULL if hval is None else _varint(len(hval)) + hval)
        encoded = b"".join(fields)
        parts.append(_varint(len(encoded)))
        parts.append(encoded)
    return b"".join(parts), max_ts


def _native_encoder() -> Callable[[Sequence[RecordFields], int], tuple[bytes, int]] | None:
    try:
        from minibroker.core._record_encode import encode_records as native  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    encoder: Callable[[Sequence[RecordFields], int], tuple[bytes, int]] = native
    return encoder


# The producer's per-record work: the C encoder (_record_encode.c) when it is built, ~30x
# faster than the Python loop it must match byte for byte (tests/unit/core/test_records.py).
encode_records = _native_encoder() or encode_records_py


def build_batch(
    records: Sequence[RecordFields],
    *,
    base_timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    """An uncompressed v2 batch holding `records` at offset deltas 0..n-1 (`attributes`: the
    transactional and control bits)."""
    if not records:
        raise ValueError("a record batch needs at least one record")
    body, max_ts = encode_records(records, base_timestamp)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            HEADER_SIZE - LOG_OVERHEAD + len(body),
            partition_leader_epoch,
            MAGIC,
            0,
            attributes,
            len(records) - 1,
            base_timestamp,
            max_ts,
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
    )
    # The CRC runs from the header's attributes on over the body: the body is copied once.
    crc = crc32c(body, crc32c(memoryview(header)[ATTRIBUTES_OFFSET:]))
    struct.pack_into(">I", header, CRC_OFFSET, crc)
    return b"".join((header, body))


# ---- reading headers (broker hot path: no per-record work) ------------------------------------


def read_header(buf: bytes | bytearray | memoryview, pos: int) -> BatchHeader:
    fields = _HEADER.unpack_from(buf, pos)
    return BatchHeader(pos, *fields)


def iter_batches(buf: bytes | memoryview, *, verify_crc: bool = False) -> Iterator[BatchHeader]:
    """Headers of the whole batches in `buf`, in order. Raises RecordError at the first batch
    that is cut short, not magic 2, or (with `verify_crc`) fails its CRC."""
    view = memoryview(buf)
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < HEADER_SIZE:
            raise RecordError(
                ErrorCode.CORRUPT_MESSAGE, f"{end - pos} trailing bytes are not a batch header"
            )
        h = read_header(view, pos)
        if h.magic != MAGIC:
            raise RecordError(
                ErrorCode.UNSUPPORTED_VERSION
                if 0 <= h.magic < MAGIC
                else ErrorCode.CORRUPT_MESSAGE,
                f"batch at byte {pos} has magic {h.magic}; only magic 2 is supported",
            )
        if h.batch_length < HEADER_SIZE - LOG_OVERHEAD or pos + h.size > end:
            raise RecordError(
                ErrorCode.CORRUPT_MESSAGE,
                f"batch at byte {pos} claims {h.batch_length} bytes; {end - pos - LOG_OVERHEAD} "
                "remain",
            )
        if verify_crc and crc32c(view[pos + ATTRIBUTES_OFFSET : pos + h.size]) != h.crc:
            raise RecordError(ErrorCode.CORRUPT_MESSAGE, f"batch at byte {pos} fails its CRC")
        yield h
        pos += h.size


def valid_prefix(buf: bytes | memoryview) -> tuple[int, list[BatchHeader]]:
    """Length of the longest prefix of whole, CRC-valid batches, and their headers (log
    recovery: whatever follows is a torn or corrupt tail)."""
    good: list[BatchHeader] = []
    try:
        for h in iter_batches(buf, verify_crc=True):
            if h.record_count < 0 or h.last_offset_delta < 0:
                break
            good.append(h)
    except RecordError:
        pass
    length = good[-1].position + good[-1].size if good else 0
    return length, good


# ---- decoding records (clients, tests) --------------------------------------------------------


def records_body(buf: bytes | memoryview, header: BatchHeader, where: str) -> bytes | memoryview:
    """The batch's records region, decompressed if it is compressed; RecordError (with the
    codec's Kafka error) for an unknown codec or bytes that do not decompress."""
    body: bytes | memoryview = memoryview(buf)[
        header.position + HEADER_SIZE : header.position + header.size
    ]
    try:
        check_codec(header.compression)
        if header.compression:
            body = decompress(header.compression, body)
    except CompressionError as exc:
        raise RecordError(exc.code, f"{where}: {exc}") from None
    return body


def decode_batch(buf: bytes | memoryview, header: BatchHeader) -> list[Record]:
    """The records of one batch, decompressed if need be; RecordError (CORRUPT_MESSAGE) if its
    body is not exactly its record count of well-formed records (record_walk.py's rules)."""
    body = records_body(buf, header, f"batch at offset {header.base_offset}")
    if header.record_count != header.last_offset_delta + 1:
        # A compacted batch (the log cleaner kept some of its records, with their offsets):
        # the walk's "offset delta = index" rule does not hold; the reader checks bounds.
        try:
            return _decode(memoryview(body), header)
        except (IndexError, ValueError) as exc:
            raise RecordError(
                ErrorCode.CORRUPT_MESSAGE, f"batch at offset {header.base_offset}: {exc}"
            ) from None
    failure = check_records(body, header.record_count)
    if failure is not None:
        raise RecordError(
            ErrorCode.CORRUPT_MESSAGE,
            f"batch at offset {header.base_offset}, record {failure[0]}: {failure[1]}",
        )
    return _decode(memoryview(body), header)


def _decode(view: memoryview, header: BatchHeader) -> list[Record]:
    pos = 0
    out = []
    # The walk above proved every length, so this loop needs no checks of its own.
    for _ in range(header.record_count):
        _, pos = _read_varint(view, pos)  # the record length, proved by the walk
        pos += 1  # record attributes
        ts_delta, pos = _read_varint(view, pos)
        off_delta, pos = _read_varint(view, pos)
        key, pos = _read_bytes(view, pos)
        value, pos = _read_bytes(view, pos)
        n_headers, pos = _read_varint(view, pos)
        headers = []
        for _ in range(n_headers):
            hkey, pos = _read_bytes(view, pos)
            hval, pos = _read_bytes(view, pos)
            headers.append(((hkey or b"").decode("utf-8", errors="replace"), hval))
        out.append(
            Record(
                header.base_offset + off_delta,
                header.base_timestamp + ts_delta,
                key,
                value,
                tuple(headers),
            )
        )
    return out


def decode_records(buf: bytes | memoryview) -> list[Record]:
    """Every record of every batch in `buf`."""
    return [r for h in iter_batches(buf) for r in decode_batch(buf, h)]
