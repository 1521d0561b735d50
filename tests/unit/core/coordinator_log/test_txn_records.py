"""`__transaction_state` records in Kafka 2.6's byte formats (TransactionLog.scala; Kafka's
TransactionLogTest: shouldThrowExceptionWriteInvalidTxn, shouldReadWriteMessages)."""

from __future__ import annotations

import struct

import pytest

from minibroker.core.coordinator_log.schema import RecordFormatError
from minibroker.core.coordinator_log.txn_records import (
    TxnState,
    TxnValue,
    read_txn_key,
    read_txn_value,
    txn_key,
    txn_value,
)


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_the_key_is_kafkas_bytes() -> None:
    assert txn_key("tx-1") == b"\x00\x00" + s("tx-1")
    assert read_txn_key(txn_key("tx-1")) == "tx-1"
    with pytest.raises(RecordFormatError, match="key version 1"):
        read_txn_key(b"\x00\x01" + s("tx-1"))


def test_an_ongoing_value_is_kafkas_bytes_partitions_grouped_by_topic() -> None:
    v = TxnValue(7, 3, 60000, TxnState.ONGOING, frozenset({("b", 1), ("a", 2), ("a", 0)}), 11, 10)
    expected = (
        struct.pack(">hqhib", 0, 7, 3, 60000, 1)
        + struct.pack(">i", 2)
        + s("a") + struct.pack(">iii", 2, 0, 2)
        + s("b") + struct.pack(">ii", 1, 1)
        + struct.pack(">qq", 11, 10)
    )  # fmt: skip
    assert txn_value(v) == expected
    assert read_txn_value(expected) == v


def test_an_empty_transaction_writes_null_partitions() -> None:
    v = TxnValue(7, 0, 60000, TxnState.EMPTY, frozenset(), 5, -1)
    data = txn_value(v)
    assert data == struct.pack(">hqhib", 0, 7, 0, 60000, 0) + struct.pack(">iqq", -1, 5, -1)
    assert read_txn_value(data) == v


@pytest.mark.parametrize("state", list(TxnState))
def test_every_state_round_trips_but_the_fence_is_never_written(state: TxnState) -> None:
    parts = frozenset() if state == TxnState.EMPTY else frozenset({("t", 0)})
    v = TxnValue(1, 2, 3, state, parts, 4, 5)
    if state == TxnState.PREPARE_EPOCH_FENCE:
        with pytest.raises(ValueError, match="PrepareAbort"):
            txn_value(v)
    else:
        assert read_txn_value(txn_value(v)) == v


def test_invalid_values_are_refused() -> None:
    with pytest.raises(ValueError, match="Empty transaction has no partitions"):
        txn_value(TxnValue(1, 0, 1, TxnState.EMPTY, frozenset({("t", 0)}), 0, 0))
    assert read_txn_value(None) is None
    good = txn_value(TxnValue(1, 0, 1, TxnState.ONGOING, frozenset({("t", 0)}), 0, 0))
    with pytest.raises(RecordFormatError):
        read_txn_value(good[:-3])
    with pytest.raises(RecordFormatError, match="value version 1"):
        read_txn_value(b"\x00\x01" + good[2:])
    with pytest.raises(RecordFormatError, match="unknown transaction state 9"):
        read_txn_value(good[:16] + b"\x09" + good[17:])
