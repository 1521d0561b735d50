"""Produce, Fetch and ListOffsets requests as protobuf messages and their answers as values:
with metadata.py's parser, the client's door to broker_pb2. Optional fields are set only when
known, since an absent field means Kafka's -1 (e.g. no leader-epoch check).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2
from minibroker.runtime.wire import error_from_wire

EpochOf = Callable[[TopicPartition], "int | None"]


@dataclass(frozen=True)
class PartitionResult:
    """One partition's Produce answer."""

    error: ErrorCode
    base_offset: int = -1
    log_append_time_ms: int = -1
    message: str = ""


def produce_request(
    acks: int, timeout_ms: int, batches: Sequence[tuple[TopicPartition, bytes]]
) -> Any:
    """One ProduceRequest carrying the given record-batch bytes per partition."""
    by_topic: dict[str, list[Any]] = {}
    for tp, records in batches:
        by_topic.setdefault(tp.topic, []).append(
            broker_pb2.PartitionProduceData(partition_index=tp.partition, records=records)
        )
    return broker_pb2.ProduceRequest(
        acks=acks,
        timeout_ms=timeout_ms,
        topics=[broker_pb2.TopicProduceData(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def produce_results(resp: Any) -> dict[TopicPartition, PartitionResult]:
    return {
        TopicPartition(t.name, p.partition_index): PartitionResult(
            error_from_wire(p.error_code), p.base_offset, p.log_append_time_ms, p.error_message
        )
        for t in resp.responses
        for p in t.partitions
    }


def fetch_request(
    offsets: Mapping[TopicPartition, int],
    epoch_of: EpochOf,
    *,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
    isolation_level: int = 0,
) -> Any:
    """A consumer's FetchRequest (no replica id) for the partitions at the given offsets."""
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in offsets.items():
        part = broker_pb2.FetchPartition(
            partition=tp.partition, fetch_offset=offset, partition_max_bytes=partition_max_bytes
        )
        epoch = epoch_of(tp)
        if epoch is not None:
            # KIP-320: a broker at another epoch answers FENCED/UNKNOWN_LEADER_EPOCH.
            part.current_leader_epoch = epoch
        by_topic.setdefault(tp.topic, []).append(part)
    return broker_pb2.FetchRequest(
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        topics=[broker_pb2.FetchTopic(topic=t, partitions=ps) for t, ps in by_topic.items()],
    )


def list_offsets_request(
    timestamps: Mapping[TopicPartition, int], epoch_of: EpochOf, isolation_level: int = 0
) -> Any:
    by_topic: dict[str, list[Any]] = {}
    for tp, ts in timestamps.items():
        part = broker_pb2.ListOffsetsPartition(partition_index=tp.partition, timestamp=ts)
        epoch = epoch_of(tp)
        if epoch is not None:
            part.current_leader_epoch = epoch
        by_topic.setdefault(tp.topic, []).append(part)
    return broker_pb2.ListOffsetsRequest(
        isolation_level=isolation_level,
        topics=[broker_pb2.ListOffsetsTopic(name=t, partitions=ps) for t, ps in by_topic.items()],
    )


def list_offsets_results(resp: Any) -> dict[TopicPartition, tuple[ErrorCode, int]]:
    return {
        TopicPartition(t.name, p.partition_index): (error_from_wire(p.error_code), p.offset)
        for t in resp.topics
        for p in t.partitions
    }
