"""The record walk: is a v2 batch's body exactly `record_count` well-formed records? Pure.

A batch whose CRC is right can still lie: its record count, its records' lengths, their
offset deltas, key/value/header lengths. Kafka's broker walks every record of a client's batch
before appending it (LogValidator; DefaultRecord.readFrom's checks); so does ours. The walk
reads only inside the body and compares every length with the bytes that remain before using
it, so absurd values cost nothing.

Each record must be, in order: a varint length (>= 0, inside the body), one attributes byte, a
varlong timestamp delta, a varint offset delta equal to its index in the batch, a key and a
value (varint length >= -1, then that many bytes), a varint header count (>= 0, at most one per
two remaining bytes) and that many headers (key length >= 0, value length >= -1); the fields
fill the record's length exactly, and the records fill the body exactly.

Deliberately stricter than Kafka 2.6 in one rule: Kafka checks inner offsets only in compressed
batches (and then rewrites them); in an uncompressed batch it keeps the offset deltas a client
wrote, so deltas 0, 0, 0 would read back as three records at one offset. Here they must be the
record's index in every batch.

`check_records_py` is the reference; `check_records` is the C version built from
`_record_walk.c` when the extension is present (the broker needs it for speed; the tests check
that both give the same answer on random and mutated bodies).
"""

from __future__ import annotations

from collections.abc import Callable

VARINT_MAX_BYTES = 5
VARLONG_MAX_BYTES = 10

Failure = tuple[int, str] | None  # (index of the record at fault, reason), or None: valid


class _Bad(Exception):
    def __init__(self, why: str) -> None:
        self.why = why


def _varint(buf: bytes | memoryview, end: int, pos: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    for i in range(max_bytes):
        if pos >= end:
            raise _Bad("it ends inside a varint")
        b = buf[pos]
        pos += 1
        if i == VARLONG_MAX_BYTES - 1 and (b & 0x7F) > 1:
            raise _Bad("a varlong exceeds 64 bits")
        raw |= (b & 0x7F) << (7 * i)
        if not b & 0x80:
            if max_bytes == VARINT_MAX_BYTES and raw > 0xFFFFFFFF:
                raise _Bad("a varint exceeds 32 bits")
            return (raw >> 1) ^ -(raw & 1), pos
    raise _Bad(
        "a varint is longer than 5 bytes"
        if max_bytes == VARINT_MAX_BYTES
        else "a varlong is longer than 10 bytes"
    )


def _skip_field(buf: bytes | memoryview, end: int, pos: int, nullable: bool, what: str) -> int:
    n, pos = _varint(buf, end, pos, VARINT_MAX_BYTES)
    if n < (-1 if nullable else 0):
        raise _Bad(f"{what} length is {'below -1' if nullable else 'negative'}")
    if n > end - pos:
        raise _Bad(f"{what} runs past the record")
    return pos + max(n, 0)


def _check_one(buf: bytes | memoryview, end: int, pos: int, index: int) -> int:
    length, pos = _varint(buf, end, pos, VARINT_MAX_BYTES)
    if length < 0:
        raise _Bad("its length is negative")
    if length > end - pos:
        raise _Bad("its length runs past the batch")
    rend = pos + length
    if pos >= rend:
        raise _Bad("it is too short for its attributes")
    pos += 1  # attributes: unused in v2
    _, pos = _varint(buf, rend, pos, VARLONG_MAX_BYTES)  # timestamp delta
    offset_delta, pos = _varint(buf, rend, pos, VARINT_MAX_BYTES)
    if offset_delta != index:
        raise _Bad("its offset delta is not its position in the batch")
    pos = _skip_field(buf, rend, pos, True, "its key")
    pos = _skip_field(buf, rend, pos, True, "its value")
    n_headers, pos = _varint(buf, rend, pos, VARINT_MAX_BYTES)
    if n_headers < 0:
        raise _Bad("its header count is negative")
    if n_headers > (rend - pos) // 2:
        raise _Bad("its header count exceeds what its bytes can hold")
    for _ in range(n_headers):
        pos = _skip_field(buf, rend, pos, False, "a header key")
        pos = _skip_field(buf, rend, pos, True, "a header value")
    if pos != rend:
        raise _Bad("its fields do not fill its length")
    return pos


def check_records_py(body: bytes | memoryview, record_count: int) -> Failure:
    """None if `body` is exactly `record_count` well-formed records, else (index, reason)."""
    end = len(body)
    pos = 0
    index = 0
    try:
        for index in range(record_count):  # noqa: B007 (the index is reported on failure)
            if pos >= end:
                return index, "the batch holds fewer records than its record count"
            pos = _check_one(body, end, pos, index)
        index = max(record_count, 0)
    except _Bad as bad:
        return index, bad.why
    if pos != end:
        return index, "bytes follow the last record of its record count"
    return None


def _native() -> Callable[[bytes | memoryview, int], Failure] | None:
    try:
        from minibroker.core._record_walk import check_records as native  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return None
    checker: Callable[[bytes | memoryview, int], Failure] = native
    return checker


_NATIVE = _native()
NATIVE = _NATIVE is not None
check_records: Callable[[bytes | memoryview, int], Failure] = _NATIVE or check_records_py
