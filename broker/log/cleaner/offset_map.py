"""The cleaner's map from each key to the offset of its last record in the dirty section
(Kafka's SkimpyOffsetMap): keys held as 16-byte MD5 digests, so its size depends on the number
of keys, not their length, and bounded by `log.cleaner.dedupe.buffer.size` the way Kafka
bounds it (24 bytes a slot, filled to `log.cleaner.io.buffer.load.factor`). When it is full the
clean stops there; the rest of the dirty section waits for the next clean."""

from __future__ import annotations

import hashlib

SLOT_BYTES = 24  # Kafka: a 16-byte MD5 hash and an 8-byte offset


def capacity_for(buffer_bytes: int, load_factor: float = 0.9) -> int:
    return max(1, int(buffer_bytes // SLOT_BYTES * load_factor))


class OffsetMap:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = -1  # the last offset put

    def __len__(self) -> int:
        return len(self._offsets)

    @staticmethod
    def _digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def put(self, key: bytes, offset: int) -> bool:
        """Record `key` at `offset`; False (nothing recorded) if that needs a slot the map
        does not have."""
        digest = self._digest(key)
        if digest not in self._offsets and len(self._offsets) >= self.capacity:
            return False
        self._offsets[digest] = offset
        self.latest_offset = offset
        return True

    def get(self, key: bytes) -> int:
        """The key's last offset, -1 if it is not in the map."""
        return self._offsets.get(self._digest(key), -1)
