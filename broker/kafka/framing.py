"""Kafka's request framing, sans I/O: a 4-byte big-endian size, then that many bytes. The
reader never allocates for a size it has not received: bytes are buffered as they arrive, and
a size below zero or above the limit is refused before anything is read for it (Kafka closes
the connection then too, `InvalidReceiveException`)."""

from __future__ import annotations

import struct

SIZE = struct.Struct(">i")


class FrameError(Exception):
    """The peer's framing cannot be followed; the message says why (the connection closes)."""


class FrameReader:
    """Feed it the bytes of one connection as they arrive; it returns each whole frame."""

    def __init__(self, max_frame_bytes: int) -> None:
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._need: int | None = None  # the size of the frame being read, once known

    @property
    def buffered(self) -> int:
        """Bytes held for a frame not yet whole (at most a frame and a size prefix)."""
        return len(self._buffer)

    def feed(self, data: bytes) -> list[bytes]:
        """The frames `data` completes, in order; FrameError for a size that cannot be."""
        self._buffer += data
        frames: list[bytes] = []
        while True:
            if self._need is None:
                if len(self._buffer) < SIZE.size:
                    return frames
                (size,) = SIZE.unpack_from(self._buffer)
                if size < 0:
                    raise FrameError(f"a request size of {size} bytes is negative")
                if size > self.max_frame_bytes:
                    raise FrameError(
                        f"a request of {size} bytes is over socket.request.max.bytes="
                        f"{self.max_frame_bytes}"
                    )
                del self._buffer[: SIZE.size]
                self._need = size
            if len(self._buffer) < self._need:
                return frames
            frames.append(bytes(self._buffer[: self._need]))
            del self._buffer[: self._need]
            self._need = None


def frame(payload: bytes) -> bytes:
    """`payload` with its size prefix."""
    return SIZE.pack(len(payload)) + payload
