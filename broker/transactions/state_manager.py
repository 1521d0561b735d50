"""Kafka's TransactionStateManager for one broker: the partitions of `__transaction_state` it
leads, each loaded from its log when the broker becomes their leader
(COORDINATOR_LOAD_IN_PROGRESS meanwhile) and forgotten when it stops leading them
(NOT_COORDINATOR); each transition written as an acks=all append before the metadata changes
(appendTransactionToLog), so that what a coordinator answers is what its successor loads. The
coordinator epoch of a partition is its leader epoch, as Kafka's.

The rules (replay, the unfinished transactions, the topic's configs) are txn_log.py's."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from broker.log.log_types import wall_clock_ms
from broker.log.scan import batches_to_end
from broker.replica_manager import ReplicaManager
from broker.transactions.txn_log import TxnTopicSpec, Unfinished, replay, unfinished
from broker.transactions.txn_metadata import Transit, TxnMetadata
from minibroker.client import admin_zk
from minibroker.core.coordinator_log.schema import RecordFormatError
from minibroker.core.coordinator_log.txn_records import txn_key, txn_value
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.records import (
    CONTROL_FLAG,
    NewRecord,
    RecordError,
    build_batch,
    decode_batch,
)
from minibroker.core.types import TRANSACTION_STATE_TOPIC, TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_errors import ZkError

LOAD_RETRY_S = 1.0
LOAD_BUFFER_BYTES = 5 << 20  # transaction.state.log.load.buffer.size (Kafka's default)
# appendTransactionToLog's timeout: Kafka's request.timeout.ms (its default).
WRITE_TIMEOUT_MS = 30_000
OnLoaded = Callable[[int, list[Unfinished]], None]

# appendTransactionToLog's mapping of an append's error to the client's answer.
_RETRIABLE = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    ErrorCode.REQUEST_TIMED_OUT,
}
_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR}


def write_error(append_error: ErrorCode) -> ErrorCode:
    if append_error in _RETRIABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    return ErrorCode.UNKNOWN_SERVER_ERROR


@dataclass
class TxnPartition:
    """A loaded partition of __transaction_state: its ids and its coordinator epoch."""

    coordinator_epoch: int
    metas: dict[str, TxnMetadata]


class TxnStateManager:
    def __init__(self, rm: ReplicaManager, on_loaded: OnLoaded) -> None:
        self.rm = rm
        s = rm.settings
        self.spec = TxnTopicSpec(
            s.get_int("transaction.state.log.num.partitions"),
            s.get_int("transaction.state.log.replication.factor"),
            s.get_int("transaction.state.log.min.isr"),
            s.get_int("transaction.state.log.segment.bytes"),
        )
        self._on_loaded = on_loaded
        self.loaded: dict[int, TxnPartition] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}

    # ---- which partitions are here -------------------------------------------------------

    def partition_of(self, transactional_id: str) -> int:
        return self.spec.partition_of(transactional_id)

    def state(self, transactional_id: str) -> ErrorCode:
        p = self.partition_of(transactional_id)
        if p in self.loaded:
            return ErrorCode.NONE
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        if TRANSACTION_STATE_TOPIC not in self.rm.metadata.topics():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NOT_COORDINATOR

    def partition(self, transactional_id: str) -> TxnPartition | None:
        return self.loaded.get(self.partition_of(transactional_id))

    def coordinator_of(self, transactional_id: str, listener: str) -> int | None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, self.partition_of(transactional_id))
        state = self.rm.metadata.partitions.get(tp)
        broker = None if state is None else self.rm.metadata.brokers.get(state.leader)
        return None if broker is None or not broker.endpoint_for(listener) else broker.broker_id

    def on_leadership(self, tp: TopicPartition, leader: bool) -> None:
        """Kafka's onElection / onResignation, for partitions of __transaction_state."""
        if tp.topic != TRANSACTION_STATE_TOPIC:
            return
        task = self._loading.pop(tp.partition, None)
        if task is not None:
            task.cancel()
        if self.loaded.pop(tp.partition, None) is not None or task is not None:
            slog.event("txn_partition_unloaded", tp=str(tp))
        if leader:
            self._loading[tp.partition] = asyncio.ensure_future(self._load(tp.partition))

    async def stop(self) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def create_topic(self) -> None:
        """KafkaApis.createInternalTopic for __transaction_state: only with its replication
        factor of brokers alive (COORDINATOR_NOT_AVAILABLE until then)."""
        live = len(self.rm.metadata.brokers)
        if live < self.spec.replication_factor:
            slog.event(
                "txn_topic_waiting", logging.WARNING, live_brokers=live,
                replication_factor=self.spec.replication_factor,
            )  # fmt: skip
            return
        try:
            await asyncio.to_thread(
                admin_zk.create_topic, self.rm.store, TRANSACTION_STATE_TOPIC,
                self.spec.partitions, self.spec.replication_factor, self.spec.configs(),
                random.Random(),
            )  # fmt: skip
        except ApiError as exc:
            if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
                slog.event("task_failed", logging.ERROR, task="txn_topic", error=str(exc))
            return
        except ZkError:
            return  # the client asks again
        slog.event(
            "topic_auto_created", topic=TRANSACTION_STATE_TOPIC, partitions=self.spec.partitions,
            replication_factor=self.spec.replication_factor, internal=True,
        )  # fmt: skip

    # ---- loading ---------------------------------------------------------------------------

    async def _load(self, partition: int) -> None:
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, partition)
        started = time.monotonic()
        while True:
            hosted = self.rm.partitions.get(tp)
            epoch = -1 if hosted is None else hosted.partition.leader_epoch
            try:
                metas = replay(await self._records(tp))
                break
            except (RecordError, RecordFormatError) as exc:  # COORDINATOR_LOAD_IN_PROGRESS
                slog.event(
                    "task_failed", logging.ERROR, task="txn_load", tp=str(tp), error=str(exc)
                )
                await asyncio.sleep(LOAD_RETRY_S)
        self._loading.pop(partition, None)
        self.loaded[partition] = TxnPartition(epoch, metas)
        todo = unfinished(metas, wall_clock_ms())
        slog.event(
            "txn_partition_loaded", tp=str(tp), transactional_ids=len(metas),
            coordinator_epoch=epoch, unfinished=len(todo),
            ms=round((time.monotonic() - started) * 1000, 1),
        )  # fmt: skip
        self._on_loaded(partition, todo)

    async def _records(self, tp: TopicPartition) -> list[tuple[bytes | None, bytes | None]]:
        """Every record of the partition, in log order."""
        hosted = self.rm.partitions.get(tp)
        out: list[tuple[bytes | None, bytes | None]] = []
        if hosted is None:
            return out
        async for data, h, offset in batches_to_end(hosted.log, LOAD_BUFFER_BYTES):
            if not h.attributes & CONTROL_FLAG:
                out.extend((r.key, r.value) for r in decode_batch(data, h) if r.offset >= offset)
        return out

    # ---- writing ---------------------------------------------------------------------------

    async def write(self, meta: TxnMetadata, transit: Transit, coordinator_epoch: int) -> ErrorCode:
        """Append the transition (acks=all) and, once it is acknowledged by a coordinator
        that still holds the partition at that epoch, complete it on the metadata; on any
        error the metadata's pending state is dropped and the client's answer returned."""
        p = self.partition_of(meta.transactional_id)
        if not self._holds(meta, coordinator_epoch):  # never write from an older epoch
            meta.abandon()
            return ErrorCode.NOT_COORDINATOR
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, p)
        record = (txn_key(meta.transactional_id), txn_value(transit.value()))
        batch = build_batch([NewRecord(*record)], base_timestamp=wall_clock_ms())
        results = await self.rm.append_records(-1, WRITE_TIMEOUT_MS, {tp: batch}, internal=True)
        error = results[tp].error
        if error is ErrorCode.NONE and not self._holds(meta, coordinator_epoch):
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER  # the partition moved meanwhile
        if error is not ErrorCode.NONE:
            meta.abandon()
            return write_error(error)
        meta.complete(transit)
        return ErrorCode.NONE

    def _holds(self, meta: TxnMetadata, coordinator_epoch: int) -> bool:
        """Whether this broker still coordinates the id at that epoch, with this metadata."""
        loaded = self.loaded.get(self.partition_of(meta.transactional_id))
        return (
            loaded is not None
            and loaded.coordinator_epoch == coordinator_epoch
            and loaded.metas.get(meta.transactional_id) is meta
        )

    async def remove(self, meta: TxnMetadata, coordinator_epoch: int) -> ErrorCode:
        """A tombstone for an expired id (its Dead transition), then it is forgotten."""
        p = self.partition_of(meta.transactional_id)
        if not self._holds(meta, coordinator_epoch):
            meta.abandon()
            return ErrorCode.NOT_COORDINATOR
        tp = TopicPartition(TRANSACTION_STATE_TOPIC, p)
        batch = build_batch(
            [NewRecord(txn_key(meta.transactional_id), None)], base_timestamp=wall_clock_ms()
        )
        results = await self.rm.append_records(-1, WRITE_TIMEOUT_MS, {tp: batch}, internal=True)
        loaded = self.loaded.get(p)
        if results[tp].error is not ErrorCode.NONE:
            meta.abandon()
            return write_error(results[tp].error)
        if loaded is not None and loaded.coordinator_epoch == coordinator_epoch:
            loaded.metas.pop(meta.transactional_id, None)
        return ErrorCode.NONE
