"""Kafka's protocol types as the coordinators' records use them (`org.apache.kafka.common.
protocol.types`: INT8/16/32/64 big-endian, STRING = int16 length + UTF-8, NULLABLE_STRING with
length -1 for null, BYTES = int32 length + bytes, ARRAY = int32 count + elements). A reader that
runs past the end or meets a negative length raises RecordFormatError. Pure."""

from __future__ import annotations

import struct


class RecordFormatError(ValueError):
    """Bytes that are not a record of the schema they claim (the message says where)."""


class Writer:
    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def int8(self, v: int) -> Writer:
        self._parts.append(struct.pack(">b", v))
        return self

    def int16(self, v: int) -> Writer:
        self._parts.append(struct.pack(">h", v))
        return self

    def int32(self, v: int) -> Writer:
        self._parts.append(struct.pack(">i", v))
        return self

    def int64(self, v: int) -> Writer:
        self._parts.append(struct.pack(">q", v))
        return self

    def string(self, v: str) -> Writer:
        data = v.encode("utf-8")
        if len(data) > 0x7FFF:
            raise ValueError(f"a STRING holds at most 32767 bytes, not {len(data)}")
        return self.int16(len(data)).raw(data)

    def nullable_string(self, v: str | None) -> Writer:
        return self.int16(-1) if v is None else self.string(v)

    def bytes_(self, v: bytes) -> Writer:
        return self.int32(len(v)).raw(v)

    def raw(self, data: bytes) -> Writer:
        self._parts.append(data)
        return self

    def done(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self._data = memoryview(data)
        self._pos = 0
        self.what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self._pos + n > len(self._data):
            raise RecordFormatError(
                f"{self.what}: needs {n} bytes at {self._pos}, has {len(self._data) - self._pos}"
            )
        out = self._data[self._pos : self._pos + n]
        self._pos += n
        return out

    def int8(self) -> int:
        return int(struct.unpack(">b", self._take(1))[0])

    def int16(self) -> int:
        return int(struct.unpack(">h", self._take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self._take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self._take(8))[0])

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise RecordFormatError(f"{self.what}: a STRING of length {n}")
        return self._utf8(n)

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._utf8(n)

    def bytes_(self) -> bytes:
        n = self.int32()
        if n < 0:
            raise RecordFormatError(f"{self.what}: BYTES of length {n}")
        return bytes(self._take(n))

    def array_length(self) -> int:
        n = self.int32()
        if n < 0 or n > len(self._data) - self._pos:  # every element takes a byte at least
            raise RecordFormatError(f"{self.what}: an ARRAY of {n} elements")
        return n

    def _utf8(self, n: int) -> str:
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(f"{self.what}: a STRING that is not UTF-8: {exc}") from None

    def end(self) -> None:
        """Kafka's Schema.read ignores trailing bytes (a newer minor version's fields)."""
