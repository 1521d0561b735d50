"""Requests and results of the replica manager, free of protobuf (servicers convert)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.replication.partition import Partition, PartitionState
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

CONSUMER_REPLICA_ID = -1


@dataclass(frozen=True)
class ProduceResult:
    error: ErrorCode
    base_offset: int = -1
    log_start_offset: int = -1
    message: str = ""


@dataclass(frozen=True)
class FetchPartitionRequest:
    tp: TopicPartition
    fetch_offset: int
    max_bytes: int
    current_leader_epoch: int | None = None
    log_start_offset: int = -1


@dataclass(frozen=True)
class FetchParams:
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    max_bytes: int
    partitions: tuple[FetchPartitionRequest, ...]
    # A follower's fetch: whether the leader sends it no records of a partition now (the
    # leader's replication throttle, KIP-73); None for consumers.
    leader_throttle: Callable[[TopicPartition, Partition], bool] | None = None

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0


@dataclass(frozen=True)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(frozen=True)
class ControlHeader:
    controller_id: int
    controller_epoch: int
    broker_epoch: int | None


@dataclass(frozen=True)
class LeaderAndIsrPartition:
    tp: TopicPartition
    state: PartitionState


@dataclass(frozen=True)
class StopReplicaPartition:
    tp: TopicPartition
    leader_epoch: int
    delete: bool


@dataclass(frozen=True)
class EpochEndOffsetResult:
    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True)
class ListOffsetResult:
    error: ErrorCode
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1
