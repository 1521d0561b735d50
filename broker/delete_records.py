"""DeleteRecords on the leader (KIP-107; Kafka 2.6's ReplicaManager.deleteRecords,
Partition.deleteRecordsOnLeader and DelayedDeleteRecords).

Per partition: only its leader deletes; not with a `cleanup.policy` without `delete`
(POLICY_VIOLATION); offset -1 means the high watermark; an offset above the HW (or below 0) is
OFFSET_OUT_OF_RANGE. The leader's log start offset moves to the offset at once (segments wholly
below it go with the next retention check, "log start offset breach"); the followers take it
from the next fetch answer and report theirs back in their next fetch. The request then waits,
up to its timeout, until the partition's low watermark (the smallest log start offset of the
leader and of the replicas on live brokers) has reached the offset; each partition answers its
low watermark, or REQUEST_TIMED_OUT with the one it reached."""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from broker.log.log_types import OffsetOutOfRange
from broker.partition_table import HostedPartition, PartitionTable
from broker.purgatory import DelayedOperation, Purgatory
from broker.topic_configs import TopicConfigs
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK
INVALID_LOW_WATERMARK = -1
# The longest a DeleteRecords may wait for the followers (a hostile timeout_ms must not park a
# connection's answer for a day); Kafka takes the client's.
MAX_TIMEOUT_MS = 300_000
# Kafka's Topic.isInternal: its own state topics (which minibroker does not keep yet).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


@dataclass(frozen=True)
class DeleteRecordsResult:
    error: ErrorCode
    low_watermark: int = INVALID_LOW_WATERMARK
    message: str = ""


def low_watermark(hosted: HostedPartition, is_alive: Callable[[int], bool]) -> int:
    """Partition.lowWatermarkIfLeader: the smallest log start offset of the leader and of the
    remote replicas whose broker is alive (-1 for one that has not fetched yet)."""
    low = hosted.log.log_start_offset
    for broker_id, replica in hosted.partition.remote.items():
        if is_alive(broker_id) and replica.log_start_offset < low:
            low = replica.log_start_offset
    return low


class DelayedDeleteRecords(DelayedOperation[dict[TopicPartition, DeleteRecordsResult]]):
    def __init__(
        self,
        timeout_ms: int,
        results: dict[TopicPartition, DeleteRecordsResult],
        required: Mapping[TopicPartition, int],
        partitions: PartitionTable,
        is_alive: Callable[[int], bool],
    ) -> None:
        super().__init__(timeout_ms)
        self._results = results
        self._pending = dict(required)
        self._partitions = partitions
        self._is_alive = is_alive

    def _status(self, tp: TopicPartition) -> tuple[bool, ErrorCode, int]:
        hosted = self._partitions.get(tp)
        if hosted is None:
            return False, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, INVALID_LOW_WATERMARK
        if not hosted.partition.is_leader:
            return False, ErrorCode.NOT_LEADER_OR_FOLLOWER, INVALID_LOW_WATERMARK
        low = low_watermark(hosted, self._is_alive)
        return low >= self._pending[tp], ErrorCode.NONE, low

    def try_complete(
        self, changed: TopicPartition | None
    ) -> dict[TopicPartition, DeleteRecordsResult] | None:
        for tp in list(self._pending) if changed is None else [changed]:
            if tp not in self._pending:
                continue
            reached, error, low = self._status(tp)
            if reached or error is not ErrorCode.NONE:
                del self._pending[tp]
                self._results[tp] = DeleteRecordsResult(error, low)
        return None if self._pending else self._results

    def on_expiration(self) -> dict[TopicPartition, DeleteRecordsResult]:
        for tp in list(self._pending):
            _, error, low = self._status(tp)
            if error is ErrorCode.NONE:
                error = ErrorCode.REQUEST_TIMED_OUT
            self._results[tp] = DeleteRecordsResult(
                error, low, "the replicas' log start offsets did not reach it within timeout_ms"
            )
        return self._results


class RecordDeletion:
    """The leader's DeleteRecords, with its purgatory (re-checked on every partition change:
    a follower's fetch reporting a new log start offset is one)."""

    def __init__(
        self,
        partitions: PartitionTable,
        topic_configs: TopicConfigs,
        is_alive: Callable[[int], bool],
        on_log_start_moved: Callable[[TopicPartition], None],
    ) -> None:
        self.partitions = partitions
        self.topic_configs = topic_configs
        self.is_alive = is_alive
        self.on_log_start_moved = on_log_start_moved
        self.purgatory: Purgatory[dict[TopicPartition, DeleteRecordsResult]] = Purgatory()

    async def delete_records(
        self,
        offsets: Mapping[TopicPartition, int],
        timeout_ms: int,
        deletable: Collection[str] | None = None,
    ) -> dict[TopicPartition, DeleteRecordsResult]:
        """`deletable`: the topics the caller may DELETE (None: all); the others are answered
        TOPIC_AUTHORIZATION_FAILED and left untouched."""
        results: dict[TopicPartition, DeleteRecordsResult] = {}
        required: dict[TopicPartition, int] = {}
        for tp, offset in offsets.items():
            if deletable is not None and tp.topic not in deletable:
                results[tp] = DeleteRecordsResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                continue
            result, moved_to = self._delete_on_leader(tp, offset)
            results[tp] = result
            if result.error is ErrorCode.NONE and result.low_watermark < moved_to:
                required[tp] = moved_to
        if not required:
            return results
        op = DelayedDeleteRecords(timeout_ms, results, required, self.partitions, self.is_alive)
        return await self.purgatory.wait(op, required)

    def _delete_on_leader(
        self, tp: TopicPartition, requested: int
    ) -> tuple[DeleteRecordsResult, int]:
        if tp.topic in INTERNAL_TOPICS:
            return DeleteRecordsResult(
                ErrorCode.INVALID_TOPIC_EXCEPTION,
                message=f"Cannot delete records of internal topic {tp.topic}",
            ), -1
        hosted = self.partitions.get(tp)
        if hosted is None:
            return DeleteRecordsResult(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION), -1
        p, log = hosted.partition, hosted.log
        if not p.is_leader:
            return DeleteRecordsResult(ErrorCode.NOT_LEADER_OR_FOLLOWER), -1
        policy = self.topic_configs.value(tp.topic, "cleanup.policy")
        if "delete" not in {x.strip() for x in policy.split(",")}:
            return DeleteRecordsResult(
                ErrorCode.POLICY_VIOLATION,
                message=f"Records of partition {tp} can not be deleted due to the configured "
                f"policy (cleanup.policy={policy})",
            ), -1
        offset = p.high_watermark if requested == HIGH_WATERMARK else requested
        before = log.log_start_offset
        try:
            if offset < 0:
                raise OffsetOutOfRange(offset, before, p.high_watermark)
            moved = log.maybe_increment_log_start_offset(offset, p.high_watermark)
        except OffsetOutOfRange:
            return DeleteRecordsResult(
                ErrorCode.OFFSET_OUT_OF_RANGE,
                message=f"cannot delete records of {tp} before offset {offset}: the high "
                f"watermark is {p.high_watermark}",
            ), -1
        if moved:
            slog.event(
                "records_deleted",
                tp=str(tp),
                requested_offset=requested,
                log_start_offset=log.log_start_offset,
                previous_log_start_offset=before,
            )
            self.on_log_start_moved(tp)
        return DeleteRecordsResult(ErrorCode.NONE, low_watermark(hosted, self.is_alive)), offset
