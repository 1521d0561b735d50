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
from broker.kafka.authz import batch_flags, topics_allowed
from broker.kafka.context import KafkaContext
from broker.kafka.errors import CloseConnection
from broker.types import CONSUMER_REPLICA_ID, FetchPartitionRequest
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.types import TopicPartition

# A produce may not keep a connection's answer waiting longer than this (Kafka's request
# timeout is the client's own; a hostile timeout_ms must not park the request for a day).
MAX_PRODUCE_TIMEOUT_MS = 300_000

_ProduceTopic = ProduceResponse.TopicProduceResponse
_ProducePartition = _ProduceTopic.PartitionProduceResponse
_FetchTopic = FetchResponse.FetchableTopicResponse
_FetchPartition = _FetchTopic.PartitionData
_Aborted = _FetchPartition.AbortedTransaction
_OffsetsTopic = ListOffsetsResponse.ListOffsetsTopicResponse
_OffsetsPartition = _OffsetsTopic.ListOffsetsPartitionResponse
_EpochTopic = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
_EpochPartition = _EpochTopic.EpochEndOffset


class _Refused:
    """A partition's produce answer when it was not appended."""

    def __init__(self, error: ErrorCode) -> None:
        self.error = error
        self.base_offset = -1
        self.log_start_offset = -1
        self.message = ""


def _by_topic(items: list[tuple[TopicPartition, Any]]) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for tp, item in items:
        out.setdefault(tp.topic, []).append(item)
    return out


def _produce_refusal(ctx: KafkaContext, request: Any, batches: dict[Any, bytes]) -> ErrorCode:
    """The whole request's authorization error (KafkaApis.handleProduceRequest): transactional
    records need WRITE on their TransactionalId, idempotent ones IDEMPOTENT_WRITE on the
    Cluster."""
    flags = [batch_flags(b) for b in batches.values()]
    if any(transactional for _, transactional in flags):
        txn_id = getattr(request, "transactional_id", None)
        if not txn_id or not ctx.may(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn_id):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif any(idempotent for idempotent, _ in flags) and not ctx.may_cluster(
        AclOperation.IDEMPOTENT_WRITE
    ):
        return ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    return ErrorCode.NONE


async def handle_produce(ctx: KafkaContext, request: Any, version: int) -> Any | None:
    """None for acks=0: Kafka sends no answer then (and closes the connection on an
    authorization error, as Kafka does when it cannot answer)."""
    batches = {
        TopicPartition(t.name, p.index): bytes(p.records or b"")
        for t in request.topic_data
        for p in t.partition_data
    }
    refusal = _produce_refusal(ctx, request, batches)
    allowed = (
        topics_allowed(ctx, AclOperation.WRITE, {tp.topic for tp in batches})
        if refusal is ErrorCode.NONE
        else set()
    )
    denied = {tp: refusal or ErrorCode.TOPIC_AUTHORIZATION_FAILED
              for tp in batches if tp.topic not in allowed}  # fmt: skip
    if denied and request.acks == 0:
        raise CloseConnection("an acks=0 produce was refused: " + denied[next(iter(denied))].name)
    timeout_ms = max(0, min(int(request.timeout_ms), MAX_PRODUCE_TIMEOUT_MS))
    results: dict[TopicPartition, Any] = dict.fromkeys(denied)
    writable = {tp: b for tp, b in batches.items() if tp not in denied}
    if writable:
        txn_id = getattr(request, "transactional_id", None) or None
        results.update(
            await ctx.rm.append_records(
                int(request.acks), timeout_ms, writable, transactional_id=txn_id
            )
        )
    if request.acks == 0:
        return None
    for tp, code in denied.items():
        results[tp] = _Refused(code)
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
    named = [
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
    # Kafka: a follower's fetch (replica id >= 0) needs CLUSTER_ACTION, else every partition
    # is TOPIC_AUTHORIZATION_FAILED; a consumer's needs READ on each topic. Brokers replicate
    # over gRPC, so even an allowed replica id is served as a consumer here.
    if int(getattr(request, "replica_id", -1)) >= 0 and not ctx.may_cluster(
        AclOperation.CLUSTER_ACTION
    ):
        readable: set[str] = set()
    else:
        readable = topics_allowed(ctx, AclOperation.READ, {p.tp.topic for p in named})
    parts = [p for p in named if p.tp.topic in readable]
    refused = [p.tp for p in named if p.tp.topic not in readable]
    call = FetchCall(
        replica_id=CONSUMER_REPLICA_ID,
        max_wait_ms=int(request.max_wait_ms),
        min_bytes=int(request.min_bytes),
        max_bytes=int(request.max_bytes),
        session_id=int(request.session_id or 0) if version >= 7 else 0,
        session_epoch=int(request.session_epoch) if version >= 7 else FINAL_EPOCH,
        partitions=parts,
        forgotten=[TopicPartition(f.topic, p) for f in forgotten for p in f.partitions],
        isolation_level=int(getattr(request, "isolation_level", 0)) if version >= 4 else 0,
    )
    answer = await handle_fetch(ctx.rm, call, ctx.fetch_max_bytes)
    if isinstance(answer, ErrorCode):
        return FetchResponse(throttle_time_ms=0, error_code=int(answer), session_id=0, responses=[])
    # A session's partitions the request did not name are authorized again each time, so a
    # revoked ACL takes effect on the next fetch (KafkaApis authorizes every session partition).
    unnamed = {tp.topic for tp, _ in answer.partitions} - readable
    readable |= topics_allowed(ctx, AclOperation.READ, unnamed)
    partitions = [
        (
            tp,
            _FetchPartition(
                partition_index=tp.partition,
                error_code=int(r.error),
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                aborted_transactions=None
                if r.aborted is None
                else [_Aborted(producer_id=pid, first_offset=f) for pid, f in r.aborted],
                preferred_read_replica=-1,
                records=r.records,
            ),
        )
        for tp, r in answer.partitions
        if tp.topic in readable
    ] + [
        (tp, _refused_fetch(tp.partition))
        for tp in [*refused, *(tp for tp, _ in answer.partitions if tp.topic not in readable)]
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


def _refused_fetch(partition: int) -> Any:
    return _FetchPartition(
        partition_index=partition, error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
        aborted_transactions=None, preferred_read_replica=-1, records=b"",
    )  # fmt: skip


async def handle_list_offsets(ctx: KafkaContext, request: Any, version: int) -> Any:
    topics = []
    described = topics_allowed(ctx, AclOperation.DESCRIBE, {t.name for t in request.topics})
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if t.name not in described:
                parts.append(
                    _OffsetsPartition(
                        partition_index=p.partition_index,
                        error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        timestamp=-1,
                        offset=-1,
                        leader_epoch=-1,
                    )  # fmt: skip
                )
                continue
            r = offset_reads.list_offset(
                ctx.rm.partitions,
                TopicPartition(t.name, p.partition_index),
                int(p.timestamp),
                _opt(p, "current_leader_epoch", version, 4),
                CONSUMER_REPLICA_ID,
                int(getattr(request, "isolation_level", 0)) if version >= 2 else 0,
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
    names = {t.topic for t in request.topics}
    # CLUSTER_ACTION (a follower's) covers every topic, else DESCRIBE on each.
    described = (
        names
        if ctx.may_cluster(AclOperation.CLUSTER_ACTION, log=False)
        else topics_allowed(ctx, AclOperation.DESCRIBE, names)
    )
    for t in request.topics:
        parts = []
        for p in t.partitions:
            if t.topic not in described:
                parts.append(
                    _EpochPartition(
                        error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                        partition=p.partition,
                        leader_epoch=-1,
                        end_offset=-1,
                    )  # fmt: skip
                )
                continue
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
