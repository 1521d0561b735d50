"""A leader's offset look-ups: ListOffsets (earliest, latest, by timestamp) and
OffsetsForLeaderEpoch (reference §4.4, §4.5), over the broker's hosted partitions."""

from __future__ import annotations

from broker.partition_table import HostedPartition, PartitionTable
from broker.types import READ_COMMITTED, EpochEndOffsetResult, ListOffsetResult
from minibroker.core.errors import ErrorCode
from minibroker.core.records import RecordError
from minibroker.core.types import TopicPartition

EARLIEST_TIMESTAMP = -2
LATEST_TIMESTAMP = -1


def leader_or_error(
    partitions: PartitionTable, tp: TopicPartition, current_leader_epoch: int | None
) -> HostedPartition | ErrorCode:
    hosted = partitions.get(tp)
    if hosted is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    error = hosted.partition.check_current_leader_epoch(current_leader_epoch)
    if error is ErrorCode.NONE and not hosted.partition.is_leader:
        error = ErrorCode.NOT_LEADER_OR_FOLLOWER
    return hosted if error is ErrorCode.NONE else error


def list_offset(
    partitions: PartitionTable,
    tp: TopicPartition,
    timestamp: int,
    current_leader_epoch: int | None,
    replica_id: int,
    isolation_level: int = 0,
) -> ListOffsetResult:
    """Kafka's fetchOffsetForTimestamp: a read_committed client's latest offset is the LSO,
    and a timestamp look-up finds records below it only (lastFetchableOffset)."""
    found = leader_or_error(partitions, tp, current_leader_epoch)
    if isinstance(found, ErrorCode):
        return ListOffsetResult(found)
    p, log = found.partition, found.log
    if timestamp == EARLIEST_TIMESTAMP:
        return ListOffsetResult(ErrorCode.NONE, log.log_start_offset, -1, p.leader_epoch)
    if timestamp == LATEST_TIMESTAMP:
        if replica_id >= 0:  # a follower asks for the leader's LEO (reference §4.5)
            return ListOffsetResult(ErrorCode.NONE, log.log_end_offset, -1, p.leader_epoch)
        error, offset = p.latest_offset_for_clients()
        if error is ErrorCode.NONE and isolation_level == READ_COMMITTED:
            offset = log.last_stable_offset(offset)
        return ListOffsetResult(error, offset, -1, p.leader_epoch)
    if timestamp < 0:
        return ListOffsetResult(ErrorCode.INVALID_REQUEST)
    # Kafka's Partition.fetchOffsetForTimestamp: the first record at or after the timestamp
    # (timestamp_search.py), answered only below the last fetchable offset; its batch's
    # leader epoch, not the partition's, goes with it.
    fetchable = p.high_watermark
    if isolation_level == READ_COMMITTED:
        fetchable = log.last_stable_offset(fetchable)
    try:
        record = log.fetch_offset_by_timestamp(timestamp)
    except RecordError as exc:  # KafkaApis answers Errors.forException (CORRUPT_MESSAGE)
        return ListOffsetResult(exc.code)
    if record is None or record.offset >= fetchable:
        return ListOffsetResult(ErrorCode.NONE)
    return ListOffsetResult(ErrorCode.NONE, record.offset, record.timestamp, record.leader_epoch)


def last_offset_for_leader_epoch(
    partitions: PartitionTable,
    tp: TopicPartition,
    leader_epoch: int,
    current_leader_epoch: int | None,
) -> EpochEndOffsetResult:
    """OffsetsForLeaderEpoch on the leader (reference §4.4, leader side)."""
    found = leader_or_error(partitions, tp, current_leader_epoch)
    if isinstance(found, ErrorCode):
        return EpochEndOffsetResult(found)
    epoch, end = found.log.epoch_cache.end_offset_for(leader_epoch, found.log.log_end_offset)
    return EpochEndOffsetResult(ErrorCode.NONE, epoch, end)
