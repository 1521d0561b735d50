"""The leader's append path (Kafka's ReplicaManager.appendRecords): a client's batches and a
transaction coordinator's COMMIT/ABORT markers appended to the partitions this broker leads,
and, for acks=all, the wait until the HW covers them (reference §2.10, §3.6).

Markers are appended as Kafka's WriteTxnMarkers handler does (origin Coordinator, acks=all):
the log checks the producer and coordinator epochs (log_txns.py) before writing."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from broker.append_refusals import INTERNAL_TOPIC_REFUSAL, append_refusal
from broker.delayed import AcksAllWaiters, DelayedProduce
from broker.log.log import Log
from broker.log.log_types import AppendInfo
from broker.log.txn_tracker import VerificationGuard
from broker.metrics import BrokerMetrics
from broker.partition_table import PartitionTable
from broker.purgatory import Purgatory
from broker.replication.partition import Partition
from broker.types import ProduceResult
from minibroker.core.control_records import Marker
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NO_PRODUCER_ID, TRANSACTIONAL_FLAG, RecordError, read_header
from minibroker.core.types import INTERNAL_TOPICS, TopicPartition
from minibroker.runtime import logging as slog

# How one partition's append is made on its log, given the leader's epoch.
Appending = Callable[[Log, int], AppendInfo]
# transaction.partition.verification.enable: (transactional id, producer id, epoch, partitions)
# -> what to answer for each (NONE: the coordinator confirmed it; broker/transactions/
# verification.py).
Verify = Callable[[str, int, int, list[TopicPartition]], Awaitable[dict[TopicPartition, ErrorCode]]]
Guard = VerificationGuard | None | bool  # False: verification off (producer_state.check)


class LeaderAppends:
    def __init__(
        self,
        partitions: PartitionTable,
        purgatory: Purgatory[dict[TopicPartition, ProduceResult]],
        acks_all: AcksAllWaiters,
        metrics: BrokerMetrics,
        on_partition_changed: Callable[[TopicPartition], None],
        now_ms: Callable[[], int],
    ) -> None:
        self._partitions = partitions
        self._purgatory = purgatory
        self._acks_all = acks_all
        self._metrics = metrics
        self._changed = on_partition_changed
        self._now_ms = now_ms
        # Told (producer id, commit, partitions) after a marker is written here: the group
        # coordinator completes transactional offsets (scheduleHandleTxnCompletion).
        self.marker_listeners: list[Callable[[int, bool, list[TopicPartition]], None]] = []
        # Set when transaction.partition.verification.enable is on (KIP-890 part 1).
        self.verify: Verify | None = None

    def _partition(self, tp: TopicPartition) -> Partition | None:
        return hosted.partition if (hosted := self._partitions.get(tp)) else None

    async def append_records(
        self,
        acks: int,
        timeout_ms: int,
        batches: dict[TopicPartition, bytes],
        *,
        internal: bool = False,
        transactional_id: str | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """Only the coordinators (`internal`) append to internal topics, as Kafka's
        internalTopicsAllowed; a client gets INVALID_TOPIC_EXCEPTION. Transactional batches
        need the request's `transactional_id` (its authorization is the caller's)."""
        if acks not in (-1, 0, 1):
            return {tp: ProduceResult(ErrorCode.INVALID_REQUIRED_ACKS) for tp in batches}
        shut = () if internal else INTERNAL_TOPICS
        out = {tp: INTERNAL_TOPIC_REFUSAL for tp in batches if tp.topic in shut}
        txn = transactional_id is not None
        guards: dict[TopicPartition, Guard] = {}
        if transactional_id is not None and self.verify is not None and not internal:
            refused, guards = await self._verified(
                transactional_id, {tp: d for tp, d in batches.items() if tp not in out}
            )
            out |= refused
        appends: dict[TopicPartition, Appending] = {
            tp: _batch(data, txn, internal, guards.get(tp, False))
            for tp, data in batches.items()
            if tp not in out
        }
        return out | await self._append(acks, timeout_ms, appends)

    async def _verified(
        self, tid: str, batches: dict[TopicPartition, bytes]
    ) -> tuple[dict[TopicPartition, ProduceResult], dict[TopicPartition, Guard]]:
        """KIP-890 part 1 (Kafka 3.6's ReplicaManager.appendRecords with verification): each
        partition where the producer has no transaction open gets a guard and the coordinator
        is asked once for all of them; a refused partition's answer, and every transactional
        partition's guard (None: a transaction is open, nothing to ask)."""
        assert self.verify is not None
        guards: dict[TopicPartition, Guard] = {}
        asking: list[TopicPartition] = []
        producer: tuple[int, int] | None = None
        refused: dict[TopicPartition, ProduceResult] = {}
        for tp, data in batches.items():
            hosted = self._partitions.get(tp)
            try:
                h = read_header(data, 0)
            except RecordError:
                continue  # the append's validation answers it
            if hosted is None or h.producer_id == NO_PRODUCER_ID:
                continue
            if not h.attributes & TRANSACTIONAL_FLAG:
                continue
            if producer is not None and producer != (h.producer_id, h.producer_epoch):
                refused[tp] = ProduceResult(  # Kafka: InvalidPidMappingException
                    ErrorCode.INVALID_PRODUCER_ID_MAPPING,
                    message="transactional records of more than one producer in one request",
                )
                continue
            producer = (h.producer_id, h.producer_epoch)
            guard = guards[tp] = hosted.log.start_txn_verification(h.producer_id)
            if guard is not None:
                asking.append(tp)
        if asking and producer is not None:
            answers = await self.verify(tid, producer[0], producer[1], asking)
            for tp in asking:
                error = answers.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR)
                if error is not ErrorCode.NONE:
                    refused[tp] = ProduceResult(error, message=_NOT_VERIFIED.get(error, ""))
        return refused, guards

    async def append_markers(
        self,
        timeout_ms: int,
        producer_id: int,
        producer_epoch: int,
        marker: Marker,
        partitions: list[TopicPartition],
    ) -> dict[TopicPartition, ErrorCode]:
        """One producer's marker on each partition, acks=all (KafkaApis.handleWriteTxnMarkers)."""

        def append(log: Log, leader_epoch: int) -> AppendInfo:
            return log.append_marker(producer_id, producer_epoch, marker, leader_epoch)

        results = await self._append(-1, timeout_ms, dict.fromkeys(partitions, append))
        written = [tp for tp, r in results.items() if r.error is ErrorCode.NONE]
        if written:
            for listener in self.marker_listeners:
                listener(producer_id, marker.commit, written)
        return {tp: r.error for tp, r in results.items()}

    async def _append(
        self, acks: int, timeout_ms: int, appends: dict[TopicPartition, Appending]
    ) -> dict[TopicPartition, ProduceResult]:
        if acks != -1:
            return {tp: self._append_to_leader(tp, a, acks)[0] for tp, a in appends.items()}
        with self._acks_all.waiting(appends):  # followers' fetches of these answer at once
            results: dict[TopicPartition, ProduceResult] = {}
            required: dict[TopicPartition, int] = {}
            for tp, a in appends.items():
                results[tp], last_offset = self._append_to_leader(tp, a, -1)
                if results[tp].error is ErrorCode.NONE and last_offset is not None:
                    required[tp] = last_offset + 1
            if not required:
                return results
            op = DelayedProduce(timeout_ms, results, required, self._partition)
            final = await self._purgatory.wait(op, required)
            if any(r.error is ErrorCode.REQUEST_TIMED_OUT for r in final.values()):
                self._metrics.produce_expirations.inc()
            return final

    def _append_to_leader(
        self, tp: TopicPartition, append: Appending, acks: int
    ) -> tuple[ProduceResult, int | None]:
        hosted = self._partitions.get(tp)
        if hosted is None:
            return ProduceResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), None
        p, log = hosted.partition, hosted.log
        error = p.check_append(acks)
        if error is not ErrorCode.NONE:
            return ProduceResult(error, message=append_refusal(error, p)), None
        try:
            info = append(log, p.leader_epoch)
        except RecordError as exc:
            return ProduceResult(exc.code, message=str(exc)), None
        if p.maybe_increment_leader_hw(log.log_end_offset, self._now_ms()):
            slog.event("hw_advanced", tp=str(tp), high_watermark=p.high_watermark, cause="append")
        self._changed(tp)
        return ProduceResult(ErrorCode.NONE, info.first_offset, log.log_start_offset), (
            info.last_offset
        )


_NOT_VERIFIED = {
    ErrorCode.INVALID_TXN_STATE: "Partition was not added to the transaction",
    ErrorCode.NOT_ENOUGH_REPLICAS: "Unable to verify the partition has been added to the "
    "transaction",
}


def _batch(data: bytes, transactional: bool, from_coordinator: bool, guard: Guard) -> Appending:
    def append(log: Log, leader_epoch: int) -> AppendInfo:
        return log.append_as_leader(
            data, leader_epoch, transactional=transactional, from_coordinator=from_coordinator,
            verified=guard,
        )  # fmt: skip

    return append
