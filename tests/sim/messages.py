"""The messages simulated nodes exchange: a small model of the gRPC API (broker.proto,
control.proto) and of ZooKeeper's wire protocol. Field names follow Kafka's."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from broker.replication.partition import PartitionState
from minibroker.core.errors import ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition

# ---- ZooKeeper --------------------------------------------------------------------------------


class ZkErr(Enum):
    NONODE = "NONODE"
    NODEEXISTS = "NODEEXISTS"
    BADVERSION = "BADVERSION"
    NOTEMPTY = "NOTEMPTY"
    SESSION_EXPIRED = "SESSION_EXPIRED"


@dataclass(frozen=True, slots=True)
class Get:
    path: str
    watch: bool = False  # a data watch; on a missing node it fires when the node appears


@dataclass(frozen=True, slots=True)
class Children:
    """The children of `path` with their data (one round trip for Kafka's read loops)."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Create:
    path: str
    data: Any = None
    ephemeral: bool = False
    sequential: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    path: str
    data: Any
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Check:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class Multi:
    ops: tuple[Create | SetData | Delete | Check, ...]


ZkOp = Get | Children | Create | SetData | Delete | Check | Multi


@dataclass(frozen=True, slots=True)
class Stat:
    data: Any
    version: int
    czxid: int
    ephemeral_owner: int


@dataclass(frozen=True, slots=True)
class MultiFailed:
    index: int
    error: ZkErr


@dataclass(frozen=True, slots=True)
class ZkRequest:
    req_id: int
    session: int
    op: ZkOp


@dataclass(frozen=True, slots=True)
class ZkResponse:
    req_id: int
    result: Any


@dataclass(frozen=True, slots=True)
class ZkWatchEvent:
    session: int
    path: str


@dataclass(frozen=True, slots=True)
class ZkSessionExpired:
    session: int


# ---- controller -> broker ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LeaderAndIsrRequest:
    req_id: int
    controller_id: int
    controller_epoch: int
    broker_epoch: int
    states: tuple[tuple[TopicPartition, PartitionState], ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    req_id: int
    controller_id: int
    controller_epoch: int
    live_brokers: tuple[int, ...]
    states: tuple[tuple[TopicPartition, LeaderAndIsr], ...]


@dataclass(frozen=True, slots=True)
class ControlResponse:
    req_id: int
    error: ErrorCode


# ---- brokers and clients ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FetchRequest:
    req_id: int
    replica_id: int  # -1 for a consumer
    tp: TopicPartition
    fetch_offset: int
    current_leader_epoch: int
    log_start_offset: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchResponse:
    req_id: int
    error: ErrorCode
    high_watermark: int = -1
    log_start_offset: int = -1
    records: bytes = b""


@dataclass(frozen=True, slots=True)
class EpochRequest:
    """OffsetsForLeaderEpoch for one partition."""

    req_id: int
    tp: TopicPartition
    current_leader_epoch: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EpochResponse:
    req_id: int
    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    """A follower's ListOffsets for LATEST and EARLIEST at once (reference §4.5)."""

    req_id: int
    tp: TopicPartition
    current_leader_epoch: int


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    req_id: int
    error: ErrorCode
    log_end_offset: int = -1
    log_start_offset: int = -1


@dataclass(frozen=True, slots=True)
class ProduceRequest:
    req_id: int
    tp: TopicPartition
    acks: int
    records: bytes


@dataclass(frozen=True, slots=True)
class ProduceResponse:
    req_id: int
    error: ErrorCode
    base_offset: int = -1
    # Not in Kafka's response: the epoch the batch was stamped with, so the checker can name
    # the batch it acknowledges (see batch_tokens).
    leader_epoch: int = -1


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    req_id: int


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    req_id: int
    leaders: tuple[tuple[TopicPartition, int, int], ...]  # (tp, leader, leader epoch)
