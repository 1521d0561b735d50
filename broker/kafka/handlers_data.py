"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch on the Kafka listener: the requests'
fields to the replica manager, its results to Kafka's answers. The batches travel as the bytes
the client wrote (validated, stamped and appended as they are; fetched as they lie in the log).

Fetches on this listener are always a consumer's: brokers replicate over gRPC, so a replica id
a Kafka client sends is not taken as a follower's (it would move the follower's state)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer.fetch import FetchResponse
from kafka.protocol.consumer.offsets import ListOffsetsResponse, OffsetForLeaderEpochResponse
from kafka.protocol.producer.produce import ProduceResponse

from broker import offset_reads
from broker.fetch.handling import FetchCall, handle_fetch
from broker.fetch.session_cache import FINAL_EPOCH
from broker.kafka.context import KafkaContext
from broker.types import CONSUMER_REPLICA_ID, FetchPartitionRequest
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

# A produce may not keep a connection's answer waiting longer than this (Kafka's request
# timeout is the client's own; a hostile timeout_ms must not park the request for a day).
MAX_PRODUCE_TIMEOUT_MS = 300_000

_ProduceTopic = ProduceResponse.TopicProduceResponse
_ProducePartition = _ProduceTopic.PartitionProduceResponse
_FetchTopic = FetchResponse.FetchableTopicResponse
_FetchPartition = _FetchTopic.PartitionData
_OffsetsTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_OffsetsPartition = _OffsetsTopic.ListOffsetsPartitionResponse
_EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochPartition = _EpochTopic.EpochEndOffset


def _by_topic(items: list[tuple[TopicPartition, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for tp, item in items:
        out.setdefault(tp.topic, []).append(item)
    return out


async def handle_produce(ctx: KafkaContext, request: Any, version: int) -> Any | None:
    """None for acks=0: Kafka sends no answer then."""
    batches = {
        TopicPartition(t.name, p.index): bytes(p.records or b"")
        for t in request.topic_data
        for p in t.partition_data
    }
    timeout_ms = max(0, min(int(request.timeout_ms), MAX_PRODUCE_TIMEOUT_MS))
    results = await ctx.rm.append_records(int(request.acks), timeout_ms, batches)
    if request.acks == 0:
        return None
    partitions = [
        (
            tp,
            _ProducePartition(
                index=tp.partition,
                error_code=int(r.error),
                base_offset=r.base_offset,
                log_append_time_ms=-1,
                log_start_offset=r.log_start_offset,
                record_errors=[],
                error_message=r.message or None,
            ),
        )
        for tp, r in results.items()
    ]
    return ProduceResponse(
        responses=[
            _ProduceTopic(name=name, partition_responses=parts)
            for name, parts in _by_topic(partitions).items()
        ],
        throttle_time_ms=0,
    )


async def handle_fetch_request(ctx: KafkaContext, request: Any, version: int) -> Any:
    forgotten = (request.forgotten_topics_data or []) if version >= 7 else []
    parts = [
        FetchPartitionRequest(
            tp=TopicPartition(t.topic, p.partition),
            fetch_offset=int(p.fetch_offset),
            max_bytes=max(0, int(p.partition_max_bytes)),
            current_leader_epoch=_opt(p, "current_leader_epoch", version, 9),
            log_start_offset=_opt(p, "log_start_offset", version, 5),
        )
        for t in request.topics
        for p in t.partitions
    ]
    call = FetchCall(
        replica_id=CONSUMER_REPLICA_ID,
        max_wait_ms=int(request.max_wait_ms),
        min_bytes=int(request.min_bytes),
        max_bytes=int(request.max_bytes),
        session_id=int(request.session_id or 0) if version >= 7 else 0,
        session_epoch=int(request.session_epoch) if version >= 7 else FINAL_EPOCH,
        partitions=parts,
        forgotten=[TopicPartition(f.topic, p) for f in forgotten for p in f.partitions],
    )
    answer = await handle_fetch(ctx.rm, call, ctx.fetch_max_bytes)
    if isinstance(answer, ErrorCode):
        return FetchResponse(throttle_time_ms=0, error_code=int(answer), session_id=0, responses=[])
    partitions = [
        (
            tp,
            _FetchPartition(
                partition_index=tp.partition,
                error_code=int(r.error),
                high_watermark=r.high_watermark,
                # No transactions: everything below the HW is stable.
                last_stable_offset=r.high_watermark,
                log_start_offset=r.log_start_offset,
                aborted_transactions=None,
                preferred_read_replica=-1,
                records=r.records,
            ),
        )
        for tp, r in answer.partitions
    ]
    return FetchResponse(
        throttle_time_ms=0,
        error_code=0,
        session_id=answer.session_id,
        responses=[
            _FetchTopic(topic=name, partitions=parts)
            for name, parts in _by_topic(partitions).items()
        ],
    )


async def handle_list_offsets(ctx: KafkaContext, request: Any, version: int) -> Any:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            r = offset_reads.list_offset(
                ctx.rm.partitions,
                TopicPartition(t.name, p.partition_index),
                int(p.timestamp),
                _opt(p, "current_leader_epoch", version, 4),
                CONSUMER_REPLICA_ID,
            )
            parts.append(
                _OffsetsPartition(
                    partition_index=p.partition_index,
                    error_code=int(r.error),
                    timestamp=r.timestamp,
                    offset=r.offset,
                    leader_epoch=r.leader_epoch,
                )
            )
        topics.append(_OffsetsTopic(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)


async def handle_offset_for_leader_epoch(ctx: KafkaContext, request: Any, version: int) -> Any:
    topics = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            r = offset_reads.last_offset_for_leader_epoch(
                ctx.rm.partitions,
                TopicPartition(t.topic, p.partition),
                int(p.leader_epoch),
                _opt(p, "current_leader_epoch", version, 2),
            )
            parts.append(
                _EpochPartition(
                    error_code=int(r.error),
                    partition=p.partition,
                    leader_epoch=r.leader_epoch,
                    end_offset=r.end_offset,
                )
            )
        topics.append(_EpochTopic(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)


def _opt(obj: Any, name: str, version: int, since: int) -> int:
    """A field that exists from version `since` on; -1 (Kafka's "none") before it."""
    value = getattr(obj, name, None) if version >= since else None
    return -1 if value is None else int(value)
