"""Producer-state snapshot files, `<offset>.snapshot`, in Kafka 2.6's format
(ProducerStateManager.writeSnapshot / readSnapshot). Pure codec.

    version                  int16  (1)
    crc                      uint32 CRC-32C of everything after it
    producer_entries         int32 count, then per producer:
        producer_id          int64
        epoch                int16
        last_sequence        int32
        last_offset          int64
        offset_delta         int32  last sequence - first sequence of the last batch
        timestamp            int64  the last batch's max timestamp
        coordinator_epoch    int32  (-1: no transaction marker yet)
        current_txn_first_offset  int64  (-1: no transaction open)

The name's offset is the log end offset the state covers: the batches below it. A file that
does not decode (wrong version, CRC, length) raises CorruptSnapshot; the log then rebuilds the
state from its batches.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from crc32c import crc32c

SUFFIX = ".snapshot"
VERSION = 1
_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_ENTRY = struct.Struct(">qhiqiqiq")
CRC_FROM = 6  # the CRC covers the bytes after version and crc


class CorruptSnapshot(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class SnapshotEntry:
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int = -1
    current_txn_first_offset: int = -1


def file_name(offset: int) -> str:
    return f"{offset:020d}{SUFFIX}"


def offset_of(name: str) -> int | None:
    stem = name[: -len(SUFFIX)]
    return int(stem) if name.endswith(SUFFIX) and len(stem) == 20 and stem.isdigit() else None


def encode(entries: list[SnapshotEntry]) -> bytes:
    body = struct.pack(">i", len(entries)) + b"".join(
        _ENTRY.pack(
            e.producer_id, e.epoch, e.last_sequence, e.last_offset, e.offset_delta,
            e.timestamp, e.coordinator_epoch, e.current_txn_first_offset,
        )
        for e in entries
    )  # fmt: skip
    return struct.pack(">hI", VERSION, crc32c(body)) + body


def decode(data: bytes) -> list[SnapshotEntry]:
    if len(data) < _HEAD.size:
        raise CorruptSnapshot(f"{len(data)} bytes is shorter than a snapshot's header")
    version, crc, count = _HEAD.unpack_from(data)
    if version != VERSION:
        raise CorruptSnapshot(f"unknown snapshot version {version}")
    if crc32c(memoryview(data)[CRC_FROM:]) != crc:
        raise CorruptSnapshot("CRC mismatch")
    if count < 0 or len(data) != _HEAD.size + count * _ENTRY.size:
        raise CorruptSnapshot(f"{count} entries do not fill its {len(data)} bytes")
    return [
        SnapshotEntry(*_ENTRY.unpack_from(data, _HEAD.size + i * _ENTRY.size)) for i in range(count)
    ]
