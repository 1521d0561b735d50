"""Kafka's sparse offset index of one segment, pure: (relative offset, position) pairs.

Rule kept: entries increase in both fields and are at least `interval_bytes` of log apart, so a
lookup lands at most about one interval (plus one batch) before the batch wanted.
"""

from __future__ import annotations

import bisect
import struct

ENTRY_SIZE = 8
DEFAULT_INTERVAL_BYTES = 4096
_ENTRY = struct.Struct(">ii")  # Kafka's OffsetIndex: relative offset int32, position int32
INT32_MAX = (1 << 31) - 1


class OffsetIndex:
    """Which byte position a batch starts at, for a sample of batches of one segment."""

    def __init__(
        self,
        base_offset: int,
        interval_bytes: int = DEFAULT_INTERVAL_BYTES,
        entries: list[tuple[int, int]] | None = None,
    ) -> None:
        self.base_offset = base_offset
        self.interval_bytes = interval_bytes
        # Two parallel lists so that lookup can bisect the offsets directly.
        self._offsets: list[int] = []
        self._positions: list[int] = []
        for offset, position in entries or []:
            self._append(offset, position)

    def __len__(self) -> int:
        return len(self._offsets)

    @property
    def entries(self) -> list[tuple[int, int]]:
        """(absolute offset, position) pairs."""
        return list(zip(self._offsets, self._positions, strict=True))

    def _append(self, offset: int, position: int) -> None:
        relative = offset - self.base_offset
        if not 0 <= relative <= INT32_MAX or not 0 <= position <= INT32_MAX:
            raise ValueError(f"index entry ({offset}, {position}) does not fit in int32")
        if self._offsets and (offset <= self._offsets[-1] or position <= self._positions[-1]):
            raise ValueError(
                f"index entry ({offset}, {position}) does not follow "
                f"({self._offsets[-1]}, {self._positions[-1]})"
            )
        self._offsets.append(offset)
        self._positions.append(position)

    def maybe_append(self, offset: int, position: int) -> bytes:
        """Index the batch starting at `position` (base offset `offset`) if more than
        `interval_bytes` of log lie since the last entry (Kafka's bytesSinceLastIndexEntry,
        derived from positions so a rebuilt index equals the live one). Returns the new
        entry's bytes for the index file, or b"" if none was added."""
        last_position = self._positions[-1] if self._positions else 0
        if position - last_position <= self.interval_bytes:
            return b""
        self._append(offset, position)
        return _ENTRY.pack(offset - self.base_offset, position)

    def lookup(self, offset: int) -> int:
        """Position of the last indexed batch whose base offset is <= `offset`; 0 if none.
        The batch holding `offset` starts there or later."""
        i = bisect.bisect_right(self._offsets, offset)
        return self._positions[i - 1] if i else 0

    def truncate_to(self, offset: int) -> None:
        """Drop entries for batches at or after `offset` (the log was cut there)."""
        i = bisect.bisect_left(self._offsets, offset)
        del self._offsets[i:]
        del self._positions[i:]

    def to_bytes(self) -> bytes:
        return b"".join(
            _ENTRY.pack(o - self.base_offset, p)
            for o, p in zip(self._offsets, self._positions, strict=True)
        )

    @classmethod
    def parse(
        cls, base_offset: int, data: bytes, interval_bytes: int = DEFAULT_INTERVAL_BYTES
    ) -> OffsetIndex:
        """An index from its file bytes; a torn last entry is ignored."""
        whole = len(data) - len(data) % ENTRY_SIZE
        entries = [(base_offset + rel, pos) for rel, pos in _ENTRY.iter_unpack(data[:whole])]
        return cls(base_offset, interval_bytes, entries)
