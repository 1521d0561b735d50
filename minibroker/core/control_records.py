"""Transaction markers: the one record of a control batch, as Kafka 2.6 writes it
(`ControlRecordType` for the key, `EndTransactionMarker` for the value). Pure.

- key: version INT16 (0), type INT16 (0 ABORT, 1 COMMIT);
- value: version INT16 (0), coordinator epoch INT32.
The batch around it has the control and transactional attribute bits, the producer's id and
epoch, and no sequence (-1)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from minibroker.core.records import BatchHeader, RecordError, decode_batch

ABORT = 0
COMMIT = 1
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlRecordError(ValueError):
    """Bytes that are not a transaction marker."""


@dataclass(frozen=True)
class Marker:
    commit: bool
    coordinator_epoch: int

    def key(self) -> bytes:
        return _KEY.pack(0, COMMIT if self.commit else ABORT)

    def value(self) -> bytes:
        return _VALUE.pack(0, self.coordinator_epoch)


def read_marker(key: bytes | None, value: bytes | None) -> Marker:
    """A control record's key and value (EndTransactionMarker.deserialize: a key shorter than
    4 bytes, a type that is not ABORT/COMMIT, a value shorter than 6 bytes or of a negative
    version are refused; a newer version is read as version 0)."""
    if key is None or len(key) < _KEY.size:
        raise ControlRecordError("a control record's key has a version and a type (4 bytes)")
    _, kind = _KEY.unpack_from(key)
    if kind not in (ABORT, COMMIT):
        raise ControlRecordError(f"control record type {kind} is not a transaction marker")
    if value is None or len(value) < _VALUE.size:
        raise ControlRecordError("a transaction marker's value has a version and an epoch")
    version, epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise ControlRecordError(f"transaction marker value version {version}: corrupt data")
    return Marker(kind == COMMIT, epoch)


def marker_of(buf: bytes | memoryview, h: BatchHeader) -> Marker | None:
    """The COMMIT/ABORT a control batch (header `h`, in `buf`) holds; None if it holds none
    that reads (Kafka skips control records of other types)."""
    try:
        records = decode_batch(buf, h)
        return read_marker(records[0].key, records[0].value) if len(records) == 1 else None
    except (RecordError, ControlRecordError):
        return None
