"""Single-partition calls for checkers, without the consumer's and producer's retries: one Fetch
with the high watermark of that very response, one Produce with its exact error code, and a
broker's own view of its replicas. Answers are dataclasses; no _pb2 object leaves this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minibroker.client.channels import ChannelPool
from minibroker.client.fetch_state import records_from
from minibroker.client.requests import (
    PartitionResult,
    fetch_request,
    produce_request,
    produce_results,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.records import Record
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2
from minibroker.runtime.wire import error_from_wire


@dataclass(frozen=True)
class FetchedPartition:
    """One partition of one Fetch response: its error, the leader's HW as that response gave
    it, and the records at or after the fetch offset."""

    error: ErrorCode
    high_watermark: int
    log_start_offset: int
    records: tuple[Record, ...]


@dataclass(frozen=True)
class ReplicaState:
    """One partition as the broker hosting it describes it (DescribeBroker)."""

    tp: TopicPartition
    is_leader: bool
    leader: int
    leader_epoch: int
    log_end_offset: int
    high_watermark: int
    isr: tuple[int, ...]


@dataclass(frozen=True)
class BrokerReplicas:
    broker_id: int
    broker_epoch: int  # the registration's czxid: a new value after a restart or a new session
    replicas: dict[TopicPartition, ReplicaState]


async def fetch_once(
    channels: ChannelPool,
    address: str,
    tp: TopicPartition,
    offset: int,
    *,
    max_wait_ms: int = 200,
    max_bytes: int = 1 << 20,
    timeout_ms: int = 5000,
) -> FetchedPartition:
    """A consumer Fetch of `tp` at `offset` from the broker at `address`; raises RpcFailure."""
    request = fetch_request(
        {tp: offset},
        lambda _tp: None,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=max_bytes,
        partition_max_bytes=max_bytes,
    )
    resp = await channels.call(address, "Fetch", request, timeout_ms + max_wait_ms)
    for topic in resp.responses:
        for p in topic.partitions:
            if topic.topic == tp.topic and p.partition_index == tp.partition:
                return _fetched(p, offset)
    return FetchedPartition(ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, ())


def _fetched(p: Any, offset: int) -> FetchedPartition:
    error = error_from_wire(p.error_code)
    records: list[Record] = []
    if error is ErrorCode.NONE and p.records:
        records, _ = records_from(bytes(p.records), offset)
    return FetchedPartition(error, p.high_watermark, p.log_start_offset, tuple(records))


async def produce_once(
    channels: ChannelPool,
    address: str,
    tp: TopicPartition,
    batch: bytes,
    *,
    acks: int = -1,
    timeout_ms: int = 10_000,
) -> PartitionResult:
    """One Produce of `batch` (record-batch bytes) to `tp`, answered as the broker answered;
    raises RpcFailure."""
    request = produce_request(acks, timeout_ms, [(tp, batch)])
    resp = await channels.call(address, "Produce", request, timeout_ms + 5000)
    results = produce_results(resp)
    return results.get(tp, PartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR, message="no answer"))


async def describe_replicas(
    channels: ChannelPool, address: str, timeout_ms: int = 1000
) -> BrokerReplicas:
    """The broker's id, epoch and every partition it hosts; raises RpcFailure."""
    resp = await channels.call(
        address, "DescribeBroker", broker_pb2.DescribeBrokerRequest(), timeout_ms
    )
    replicas = {}
    for p in resp.partitions:
        tp = TopicPartition(p.topic, p.partition)
        replicas[tp] = ReplicaState(
            tp=tp,
            is_leader=p.is_leader,
            leader=p.leader,
            leader_epoch=p.leader_epoch,
            log_end_offset=p.log_end_offset,
            high_watermark=p.high_watermark,
            isr=tuple(p.isr),
        )
    return BrokerReplicas(resp.broker_id, resp.broker_epoch, replicas)
