"""`__transaction_state` loading: the last record of each id wins, tombstones remove, and a
decided but unfinished transaction is completed by the new coordinator (Kafka's
TransactionStateManagerTest: testLoadAndRemoveTransactionsForPartition,
shouldWriteTxnMarkersForTransactionInPreparedCommitState / ...PreparedAbortState)."""

from __future__ import annotations

import pytest

from broker.transactions.txn_log import TxnTopicSpec, replay, unfinished
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.coordinator_log.schema import RecordFormatError
from minibroker.core.coordinator_log.txn_records import TxnState, TxnValue, txn_key, txn_value

S = TxnState
TP = frozenset({("t", 0)})


def rec(tid: str, state: TxnState, epoch: int = 0) -> tuple[bytes, bytes]:
    parts = frozenset() if state == S.EMPTY else TP
    return txn_key(tid), txn_value(TxnValue(5, epoch, 60_000, state, parts, 10, 1))


def test_the_topic_is_kafkas() -> None:
    spec = TxnTopicSpec()
    assert spec.configs() == {
        "unclean.leader.election.enable": "false", "compression.type": "uncompressed",
        "cleanup.policy": "compact", "min.insync.replicas": "2", "segment.bytes": "104857600",
    }  # fmt: skip
    assert spec.partition_of("my-txn") == partition_for("my-txn", 50)


def test_replay_keeps_the_last_value_and_drops_tombstones() -> None:
    loaded = replay([
        rec("a", S.EMPTY), rec("a", S.ONGOING), rec("b", S.EMPTY),
        (txn_key("b"), None), rec("c", S.PREPARE_COMMIT, epoch=3), (None, b"ignored"),
    ])  # fmt: skip
    assert sorted(loaded) == ["a", "c"]
    assert loaded["a"].state == S.ONGOING and loaded["a"].partitions == set(TP)
    assert loaded["c"].producer_epoch == 3
    with pytest.raises(RecordFormatError):
        replay([(b"\x00\x07", b"")])


def test_decided_transactions_are_completed_by_the_new_coordinator() -> None:
    loaded = replay([rec("a", S.PREPARE_COMMIT), rec("b", S.PREPARE_ABORT), rec("c", S.ONGOING)])
    todo = unfinished(loaded, now_ms=99)
    assert [(u.meta.transactional_id, u.commit, u.transit.state) for u in todo] == [
        ("a", True, S.COMPLETE_COMMIT), ("b", False, S.COMPLETE_ABORT),
    ]  # fmt: skip
    assert todo[0].transit.partitions == frozenset() and todo[0].transit.last_update_ms == 99
    todo[0].meta.complete(todo[0].transit)
    assert loaded["a"].state == S.COMPLETE_COMMIT and loaded["a"].partitions == set()
    # an ongoing one is left to its timeout (or its producer)
    assert loaded["c"].pending is None
