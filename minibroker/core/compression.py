"""Kafka's batch compression codecs (attributes bits 0-2): gzip 1, snappy 2, lz4 3, zstd 4. Pure.

Decompression is bounded: it never produces more than `max_bytes`, whatever a batch claims, so a
hostile batch cannot make the broker allocate gigabytes (a "zip bomb"); garbage, a truncated
stream or bytes after the stream's end are CORRUPT_MESSAGE. Ids 5-7 name no codec: also
CORRUPT_MESSAGE here, where Kafka 2.6's CompressionType.forId throws an IllegalArgumentException
that reaches the client as UNKNOWN_SERVER_ERROR (a deliberate difference: the batch is bad).

Formats as Kafka's clients write them: gzip streams; snappy in xerial's framing (Kafka's Java
client) or raw (some other clients), told apart by xerial's magic; the LZ4 frame format; zstd
frames.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable

import cramjam
import lz4.frame
import zstandard

from minibroker.core.errors import ErrorCode

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
# The most a batch's records may decompress to (Kafka sets no bound; 64 MiB is 64 times
# message.max.bytes' default and far above what a client writes).
MAX_DECOMPRESSED_BYTES = 64 << 20

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")  # magic, version 1, minimum compatible version 1
_XERIAL_BLOCK = 32 << 10  # Kafka's Java client's block size
_INT32 = struct.Struct(">i")


class CompressionError(ValueError):
    """Bytes that do not decompress; `code` is the Kafka error to answer with."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


def _corrupt(codec: int, why: str) -> CompressionError:
    return CompressionError(
        ErrorCode.CORRUPT_MESSAGE, f"{CODEC_NAMES[codec]} records do not decompress: {why}"
    )


def _too_big(codec: int, max_bytes: int) -> CompressionError:
    return CompressionError(
        ErrorCode.CORRUPT_MESSAGE,
        f"{CODEC_NAMES[codec]} records decompress to more than {max_bytes} bytes",
    )


def _gunzip(data: bytes | memoryview, max_bytes: int) -> bytes:
    d = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
    try:
        out = d.decompress(data, max_bytes + 1)
    except zlib.error as exc:
        raise _corrupt(GZIP, str(exc)) from None
    if len(out) > max_bytes:
        raise _too_big(GZIP, max_bytes)
    if not d.eof or d.unused_data:
        raise _corrupt(GZIP, "the stream is cut short" if not d.eof else "bytes after its end")
    return out


def _unsnappy_raw(data: bytes | memoryview, budget: int) -> bytes:
    raw = bytes(data)
    try:
        if cramjam.snappy.decompress_raw_len(raw) > budget:
            raise _too_big(SNAPPY, budget)
        return bytes(cramjam.snappy.decompress_raw(raw))
    except cramjam.DecompressionError as exc:
        raise _corrupt(SNAPPY, str(exc)) from None


def _unsnappy(data: bytes | memoryview, max_bytes: int) -> bytes:
    view = memoryview(data)
    if bytes(view[: len(_XERIAL_MAGIC)]) != _XERIAL_MAGIC:
        return _unsnappy_raw(view, max_bytes)
    pos = _XERIAL_HEADER.size
    if len(view) < pos:
        raise _corrupt(SNAPPY, "xerial header cut short")
    parts: list[bytes] = []
    total = 0
    while pos < len(view):
        if len(view) - pos < 4:
            raise _corrupt(SNAPPY, "xerial block length cut short")
        (n,) = _INT32.unpack_from(view, pos)
        pos += 4
        if n < 0 or n > len(view) - pos:
            raise _corrupt(SNAPPY, f"xerial block of {n} bytes runs past the data")
        block = _unsnappy_raw(view[pos : pos + n], max_bytes - total)
        total += len(block)
        parts.append(block)
        pos += n
    return b"".join(parts)


def _unlz4(data: bytes | memoryview, max_bytes: int) -> bytes:
    d = lz4.frame.LZ4FrameDecompressor()
    try:
        out: bytes = d.decompress(bytes(data), max_length=max_bytes + 1)
    except RuntimeError as exc:
        raise _corrupt(LZ4, str(exc)) from None
    if len(out) > max_bytes:
        raise _too_big(LZ4, max_bytes)
    if not d.eof or d.unused_data:
        raise _corrupt(LZ4, "the frame is cut short" if not d.eof else "bytes after its end")
    return out


def _unzstd(data: bytes | memoryview, max_bytes: int) -> bytes:
    d = zstandard.ZstdDecompressor().decompressobj()
    try:
        # decompressobj has no output bound; feed it in slices and stop once past the bound.
        parts: list[bytes] = []
        total = 0
        view = memoryview(data)
        for start in range(0, len(view), 64 << 10):
            part = d.decompress(bytes(view[start : start + (64 << 10)]))
            total += len(part)
            if total > max_bytes:
                raise _too_big(ZSTD, max_bytes)
            parts.append(part)
    except zstandard.ZstdError as exc:
        raise _corrupt(ZSTD, str(exc)) from None
    if not d.eof or d.unused_data:
        raise _corrupt(ZSTD, "the frame is cut short" if not d.eof else "bytes after its end")
    return b"".join(parts)


_DECOMPRESS: dict[int, Callable[[bytes | memoryview, int], bytes]] = {
    GZIP: _gunzip,
    SNAPPY: _unsnappy,
    LZ4: _unlz4,
    ZSTD: _unzstd,
}


def check_codec(codec: int) -> None:
    """CompressionError unless `codec` names one of Kafka's codecs."""
    if codec not in CODEC_NAMES:
        raise CompressionError(ErrorCode.CORRUPT_MESSAGE, f"unknown compression codec id {codec}")


def decompress(
    codec: int, data: bytes | memoryview, max_bytes: int = MAX_DECOMPRESSED_BYTES
) -> bytes:
    """The records' bytes of a batch compressed with `codec`, at most `max_bytes` of them."""
    check_codec(codec)
    if codec == NONE:
        return bytes(data)
    return _DECOMPRESS[codec](data, max_bytes)


def compress(codec: int, data: bytes) -> bytes:
    """`data` compressed as Kafka's Java client writes it (for clients and tests)."""
    check_codec(codec)
    if codec == GZIP:
        c = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        blocks = [
            bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_BLOCK]))
            for i in range(0, len(data), _XERIAL_BLOCK)
        ]
        return _XERIAL_HEADER.pack(_XERIAL_MAGIC, 1, 1) + b"".join(
            _INT32.pack(len(b)) + b for b in blocks
        )
    if codec == LZ4:
        out: bytes = lz4.frame.compress(data)
        return out
    if codec == ZSTD:
        return zstandard.ZstdCompressor().compress(data)
    return data
