"""`__transaction_state`: the topic a transaction coordinator writes (its configs, the partition
of a transactional id) and what a coordinator does on becoming leader of one of its partitions
(Kafka 2.6's TransactionStateManager.transactionTopicConfigs, partitionFor,
loadTransactionMetadata and loadTransactionsForTxnTopicPartition). Pure.

Loading replays the partition's records in order: the last value of each transactional id wins,
a tombstone removes it. Transactions found in PrepareCommit/PrepareAbort were decided by the
previous coordinator but not finished: the new one completes them (their markers sent again,
then CompleteCommit/CompleteAbort written), so a coordinator's failover never leaves a
transaction half done."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from broker.transactions.txn_metadata import Transit, TxnMetadata
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.coordinator_log.txn_records import TxnState, read_txn_key, read_txn_value
from minibroker.core.types import TRANSACTION_STATE_TOPIC

__all__ = ["TRANSACTION_STATE_TOPIC", "TxnTopicSpec", "Unfinished", "replay", "unfinished"]


@dataclass(frozen=True)
class TxnTopicSpec:
    """transaction.state.log.num.partitions, .replication.factor, .min.isr, .segment.bytes
    (Kafka's defaults: 50, 3, 2, 100 MiB)."""

    partitions: int = 50
    replication_factor: int = 3
    min_isr: int = 2
    segment_bytes: int = 100 * 1024 * 1024

    def configs(self) -> dict[str, str]:
        """transactionTopicConfigs: compacted, uncompressed, never an unclean leader."""
        return {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": str(self.min_isr),
            "segment.bytes": str(self.segment_bytes),
        }

    def partition_of(self, transactional_id: str) -> int:
        """TransactionStateManager.partitionFor."""
        return partition_for(transactional_id, self.partitions)


def replay(records: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, TxnMetadata]:
    """The transactional ids of a partition from its (key, value) records, in log order.
    Raises RecordFormatError for a record that is not the topic's."""
    out: dict[str, TxnMetadata] = {}
    for key, value in records:
        if key is None:
            continue  # Kafka skips a record without a key (none is ever written)
        tid = read_txn_key(key)
        v = read_txn_value(value)
        if v is None:
            out.pop(tid, None)
        else:
            out[tid] = TxnMetadata.loaded(tid, v)
    return out


@dataclass(frozen=True)
class Unfinished:
    """A decided transaction to complete: its markers to send, then `transit` to write."""

    meta: TxnMetadata
    commit: bool
    transit: Transit


def unfinished(loaded: dict[str, TxnMetadata], now_ms: int) -> list[Unfinished]:
    """loadTransactionsForTxnTopicPartition's pending completions (each metadata is left
    pending on its Complete transition)."""
    out = []
    for _, meta in sorted(loaded.items()):
        if meta.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            commit = meta.state == TxnState.PREPARE_COMMIT
            out.append(Unfinished(meta, commit, meta.prepare_complete(now_ms)))
    return out
