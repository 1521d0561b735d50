"""`__consumer_offsets`, the topic: when a broker may create it, with what, and how the group
coordinator's appends to it answer (Kafka 2.6's KafkaApis.createInternalTopic,
GroupCoordinator.offsetsTopicConfigs, GroupMetadataManager.storeOffsets / storeGroup). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass

from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.errors import ErrorCode
from minibroker.core.types import OFFSETS_TOPIC

__all__ = ["OFFSETS_TOPIC", "OffsetsTopicSpec", "commit_error", "group_store_error"]


@dataclass(frozen=True)
class OffsetsTopicSpec:
    """offsets.topic.num.partitions, offsets.topic.replication.factor,
    offsets.topic.segment.bytes (Kafka's defaults: 50, 3, 100 MiB)."""

    partitions: int = 50
    replication_factor: int = 3
    segment_bytes: int = 100 * 1024 * 1024

    def configs(self) -> dict[str, str]:
        """The topic's own configs (GroupCoordinator.offsetsTopicConfigs)."""
        return {
            "cleanup.policy": "compact",
            "segment.bytes": str(self.segment_bytes),
            "compression.type": "producer",
        }

    def creation_error(self, live_brokers: int) -> ErrorCode:
        """Whether a broker may create the topic now: Kafka 2.6 does not lower the replication
        factor to the live brokers, it answers COORDINATOR_NOT_AVAILABLE until enough are up
        (a single-broker deployment sets offsets.topic.replication.factor=1)."""
        if live_brokers < self.replication_factor:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE

    def partition_of(self, group_id: str) -> int:
        """GroupMetadataManager.partitionFor."""
        return partition_for(group_id, self.partitions)


_UNAVAILABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.NOT_ENOUGH_REPLICAS,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    }
)
_MOVED = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR})
_TOO_LARGE = frozenset(
    {ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE, ErrorCode.INVALID_FETCH_SIZE}
)


def commit_error(append_error: ErrorCode) -> ErrorCode:
    """An OffsetCommit's answer for its append's error (GroupMetadataManager.storeOffsets)."""
    if append_error in _UNAVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    if append_error in _TOO_LARGE:
        return ErrorCode.INVALID_COMMIT_OFFSET_SIZE
    return append_error


def group_store_error(append_error: ErrorCode) -> ErrorCode:
    """A SyncGroup's answer when the group's metadata does not append (storeGroup)."""
    if append_error in _UNAVAILABLE:
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if append_error in _MOVED:
        return ErrorCode.NOT_COORDINATOR
    if append_error is ErrorCode.REQUEST_TIMED_OUT:
        return ErrorCode.REBALANCE_IN_PROGRESS
    if append_error in _TOO_LARGE:
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return append_error


def metadata_too_large(metadata: str | None, max_bytes: int) -> bool:
    """GroupCoordinator.validateOffsetMetadataLength (offset.metadata.max.bytes, 4096): Java's
    String.length, UTF-16 code units."""
    return metadata is not None and len(metadata.encode("utf-16-le")) // 2 > max_bytes
