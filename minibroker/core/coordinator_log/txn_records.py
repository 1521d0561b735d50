"""The records of `__transaction_state` in Kafka 2.6's formats (`kafka/coordinator/transaction/
TransactionLog.scala`: keyToBytes, valueToBytes, readTxnRecordKey, readTxnRecordValue), so that
Kafka's `TransactionLogMessageFormatter` could read minibroker's topic. Pure.

- key v0: `transactional_id` (STRING);
- value v0: `producer_id` INT64, `producer_epoch` INT16, `transaction_timeout` INT32,
  `transaction_status` INT8 (TransactionState.byte), `transaction_partitions` nullable ARRAY of
  `topic` STRING + `partition_ids` ARRAY(INT32) (null exactly when the state is Empty, as
  valueToBytes writes it), `transaction_entry_timestamp` INT64 (last update),
  `transaction_start_timestamp` INT64.
A null value is a tombstone: the transactional id expired
(`transactional.id.expiration.ms`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from minibroker.core.coordinator_log.schema import Reader, RecordFormatError, Writer

KEY_VERSION = 0
VALUE_VERSION = 0


class TxnState(enum.IntEnum):
    """TransactionMetadata.scala's states, by the byte the log stores."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7  # in memory only: the log records a fence as PREPARE_ABORT


@dataclass(frozen=True)
class TxnValue:
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    last_update_ms: int
    start_ms: int


def txn_key(transactional_id: str) -> bytes:
    return Writer().int16(KEY_VERSION).string(transactional_id).done()


def read_txn_key(data: bytes) -> str:
    r = Reader(data, "__transaction_state key")
    version = r.int16()
    if version != KEY_VERSION:
        raise RecordFormatError(f"unknown __transaction_state key version {version}")
    return r.string()


def txn_value(value: TxnValue) -> bytes:
    if value.state == TxnState.PREPARE_EPOCH_FENCE:
        raise ValueError("PrepareEpochFence is never written: the log records PrepareAbort")
    if value.state == TxnState.EMPTY and value.partitions:
        raise ValueError(f"an Empty transaction has no partitions, not {sorted(value.partitions)}")
    w = Writer().int16(VALUE_VERSION).int64(value.producer_id).int16(value.producer_epoch)
    w.int32(value.timeout_ms).int8(int(value.state))
    if value.state == TxnState.EMPTY:
        w.int32(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(value.partitions):
            by_topic.setdefault(topic, []).append(partition)
        w.int32(len(by_topic))
        for topic, ids in by_topic.items():
            w.string(topic).int32(len(ids))
            for p in ids:
                w.int32(p)
    return w.int64(value.last_update_ms).int64(value.start_ms).done()


def read_txn_value(data: bytes | None) -> TxnValue | None:
    """None for a tombstone."""
    if data is None:
        return None
    r = Reader(data, "__transaction_state value")
    version = r.int16()
    if version != VALUE_VERSION:
        raise RecordFormatError(f"unknown __transaction_state value version {version}")
    pid, epoch, timeout, state_byte = r.int64(), r.int16(), r.int32(), r.int8()
    try:
        state = TxnState(state_byte)
    except ValueError:
        raise RecordFormatError(f"unknown transaction state {state_byte}") from None
    partitions: set[tuple[str, int]] = set()
    count = r.int32()
    if count < -1 or count > len(data):
        raise RecordFormatError(f"__transaction_state value: an ARRAY of {count} elements")
    for _ in range(max(count, 0)):
        topic = r.string()
        for _ in range(r.array_length()):
            partitions.add((topic, r.int32()))
    if state == TxnState.EMPTY:
        partitions.clear()  # readTxnRecordValue reads no partitions for Empty
    return TxnValue(pid, epoch, timeout, state, frozenset(partitions), r.int64(), r.int64())
