"""Requests and results of the replica manager, free of protobuf (servicers convert)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from broker.replication.partition import Partition, PartitionState
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

CONSUMER_REPLICA_ID = -1
READ_COMMITTED = 1  # a Fetch's or ListOffsets' isolation level (0: read_uncommitted)


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
    # 1: read_committed (a consumer reads below the LSO only, with the aborted transactions)
    isolation_level: int = 0

    @property
    def is_follower(self) -> bool:
        return self.replica_id >= 0

    @property
    def read_committed(self) -> bool:
        return self.isolation_level == READ_COMMITTED and not self.is_follower


@dataclass(frozen=True)
class FetchPartitionResult:
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""
    last_stable_offset: int = -1
    # read_committed: (producer id, first offset) of each aborted transaction the records touch
    aborted: tuple[tuple[int, int], ...] | None = None


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
