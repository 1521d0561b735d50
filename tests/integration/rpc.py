"""Raw Broker RPCs for tests that need exact control over requests (the client library hides
retries and batching on purpose)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch, decode_records
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2, broker_pb2_grpc

_channels: dict[str, grpc.Channel] = {}


def close_channels() -> None:
    """Close every cached channel: gRPC's threads must be idle when a later test forks a child
    (Spark's JVM launch runs Python in the forked child; with gRPC threads busy it can die
    before exec: JAVA_GATEWAY_EXITED, seen under load)."""
    while _channels:
        _channels.popitem()[1].close()


def stub(address: str) -> broker_pb2_grpc.BrokerStub:
    channel = _channels.get(address)
    if channel is None:
        channel = _channels[address] = grpc.insecure_channel(address)
    return broker_pb2_grpc.BrokerStub(channel)


def batch(*values: bytes, ts: int | None = None) -> bytes:
    """Records stamped now by default: retention deletes records older than retention.ms."""
    now = int(time.time() * 1000) if ts is None else ts
    return build_batch([NewRecord(None, v) for v in values], base_timestamp=now)


@dataclass
class Produced:
    error: ErrorCode
    base_offset: int
    message: str


def produce(
    address: str, tp: TopicPartition, records: bytes, *, acks: int = -1, timeout_ms: int = 10_000
) -> Produced:
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=timeout_ms)
    request.topics.add(name=tp.topic).partitions.add(partition_index=tp.partition, records=records)
    response = stub(address).Produce(request, timeout=timeout_ms / 1000 + 10)
    p = response.responses[0].partitions[0]
    return Produced(ErrorCode(p.error_code), p.base_offset, p.error_message)


@dataclass
class Fetched:
    error: ErrorCode
    high_watermark: int
    records: bytes

    def offsets(self) -> list[int]:
        return [r.offset for r in decode_records(self.records)]

    def values(self) -> list[bytes | None]:
        return [r.value for r in decode_records(self.records)]


def fetch(
    address: str,
    tp: TopicPartition,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    current_leader_epoch: int | None = None,
    replica_id: int | None = None,
) -> Fetched:
    request = broker_pb2.FetchRequest(
        max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes
    )
    if replica_id is not None:
        request.replica_id = replica_id
    part = request.topics.add(topic=tp.topic).partitions.add(
        partition=tp.partition, fetch_offset=offset, partition_max_bytes=max_bytes
    )
    if current_leader_epoch is not None:
        part.current_leader_epoch = current_leader_epoch
    response = stub(address).Fetch(request, timeout=max_wait_ms / 1000 + 10)
    p = response.responses[0].partitions[0]
    return Fetched(ErrorCode(p.error_code), p.high_watermark, p.records)


def list_offset(address: str, tp: TopicPartition, timestamp: int = -1) -> tuple[ErrorCode, int]:
    request = broker_pb2.ListOffsetsRequest()
    request.topics.add(name=tp.topic).partitions.add(
        partition_index=tp.partition, timestamp=timestamp
    )
    response = stub(address).ListOffsets(request, timeout=10)
    p = response.topics[0].partitions[0]
    return ErrorCode(p.error_code), p.offset


def metadata(address: str, topic: str) -> dict[int, tuple[int, int, tuple[int, ...]]]:
    """partition -> (leader, leader epoch, ISR) as one broker's metadata cache has it."""
    response = stub(address).Metadata(broker_pb2.MetadataRequest(topics=[topic]), timeout=10)
    out = {}
    for t in response.topics:
        for p in t.partitions:
            out[p.partition_index] = (p.leader_id, p.leader_epoch, tuple(p.isr_nodes))
    return out
