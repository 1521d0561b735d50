"""InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit on the Kafka
listener: Kafka 2.6's fields to the transaction coordinator (broker/transactions) and the group
coordinator (transactional offsets) and back. Authorization as KafkaApis: WRITE on the
TransactionalId (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each added topic, READ on the
group and its topics for offsets; an idempotent producer's InitProducerId (no transactional id)
needs IDEMPOTENT_WRITE on the Cluster and gets a fresh producer id at epoch 0."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnResponse,
    EndTxnResponse,
    InitProducerIdResponse,
    TxnOffsetCommitResponse,
)

from broker.kafka.authz import commit_refusals, topics_allowed
from broker.kafka.context import KafkaContext
from broker.log.log_types import wall_clock_ms
from minibroker.core.coordinator_log.group_records import NO_EPOCH, OffsetValue
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.types import OFFSETS_TOPIC, TopicPartition

E = ErrorCode
_TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
_PartitionResult = _TopicResult.AddPartitionsToTxnPartitionResult
_OffsetTopic = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
_OffsetPartition = _OffsetTopic.TxnOffsetCommitResponsePartition


def _txn_allowed(ctx: KafkaContext, tid: str) -> bool:
    return ctx.may(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, tid)


async def handle_init_producer_id(ctx: KafkaContext, request: Any, version: int) -> Any:
    def answer(error: ErrorCode, producer_id: int = -1, epoch: int = -1) -> Any:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(error), producer_id=producer_id,
            producer_epoch=epoch,
        )  # fmt: skip

    tid = request.transactional_id
    if tid is None:
        if not ctx.may_cluster(AclOperation.IDEMPOTENT_WRITE):
            return answer(E.CLUSTER_AUTHORIZATION_FAILED)
        return answer(E.NONE, await ctx.producer_ids.next_producer_id(), 0)
    if not _txn_allowed(ctx, tid):
        return answer(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    expected = None
    if version >= 3 and int(request.producer_id) >= 0:
        expected = (int(request.producer_id), int(request.producer_epoch))
    error, pid, epoch = await ctx.txns.init_producer_id(
        tid, int(request.transaction_timeout_ms), expected
    )
    return answer(error, pid, epoch)


async def handle_add_partitions_to_txn(ctx: KafkaContext, request: Any, version: int) -> Any:
    tid = request.v3_and_below_transactional_id
    wanted = [
        TopicPartition(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions
    ]
    errors: dict[TopicPartition, ErrorCode]
    if not _txn_allowed(ctx, tid):
        errors = dict.fromkeys(wanted, E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
    else:
        writable = topics_allowed(ctx, AclOperation.WRITE, {tp.topic for tp in wanted})
        known = ctx.rm.metadata.partitions
        refused = {
            tp: E.TOPIC_AUTHORIZATION_FAILED
            if tp.topic not in writable
            else E.UNKNOWN_TOPIC_OR_PARTITION
            for tp in wanted
            if tp.topic not in writable or tp not in known
        }
        if refused:  # KafkaApis: the others OPERATION_NOT_ATTEMPTED
            errors = {tp: refused.get(tp, E.OPERATION_NOT_ATTEMPTED) for tp in wanted}
        else:
            error = await ctx.txns.add_partitions(
                tid, int(request.v3_and_below_producer_id),
                int(request.v3_and_below_producer_epoch),
                frozenset((tp.topic, tp.partition) for tp in wanted),
            )  # fmt: skip
            errors = dict.fromkeys(wanted, error)
    by_topic: dict[str, list[Any]] = {}
    for tp, e in errors.items():
        by_topic.setdefault(tp.topic, []).append(
            _PartitionResult(partition_index=tp.partition, partition_error_code=int(e))
        )
    return AddPartitionsToTxnResponse(
        throttle_time_ms=0,
        results_by_topic_v3_and_below=[
            _TopicResult(name=name, results_by_partition=parts) for name, parts in by_topic.items()
        ],
    )


async def handle_add_offsets_to_txn(ctx: KafkaContext, request: Any, version: int) -> Any:
    tid, group = request.transactional_id, request.group_id
    if not _txn_allowed(ctx, tid):
        error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.may(AclOperation.READ, ResourceType.GROUP, group):
        error = E.GROUP_AUTHORIZATION_FAILED
    else:
        partition = ctx.groups.offsets.partition_of(group)
        error = await ctx.txns.add_partitions(
            tid, int(request.producer_id), int(request.producer_epoch),
            frozenset({(OFFSETS_TOPIC, partition)}),
        )  # fmt: skip
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=int(error))


async def handle_end_txn(ctx: KafkaContext, request: Any, version: int) -> Any:
    """v5 with transaction.version 2 (KIP-890 part 2) ends the transaction with the producer's
    epoch bumped and answers the producer id and epoch to go on with; v2-v4 answer as v1."""
    tid = request.transactional_id
    pid, epoch = -1, -1
    if not _txn_allowed(ctx, tid):
        error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        bump = version >= 5 and ctx.rm.settings.get_int("transaction.version") >= 2
        error, pid, epoch = await ctx.txns.end_txn(
            tid, int(request.producer_id), int(request.producer_epoch), bool(request.committed),
            bump,
        )  # fmt: skip
    if version >= 5:
        return EndTxnResponse(
            throttle_time_ms=0, error_code=int(error), producer_id=pid, producer_epoch=epoch
        )
    return EndTxnResponse(throttle_time_ms=0, error_code=int(error))


async def handle_txn_offset_commit(ctx: KafkaContext, request: Any, version: int) -> Any:
    offsets = {
        TopicPartition(t.name, p.partition_index): OffsetValue(
            int(p.committed_offset),
            p.committed_metadata or "",
            wall_clock_ms(),
            int(p.committed_leader_epoch) if version >= 2 else NO_EPOCH,
        )  # fmt: skip
        for t in request.topics
        for p in t.partitions
    }
    group, tid = request.group_id, request.transactional_id
    error = E.NONE
    if not _txn_allowed(ctx, tid):
        error = E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.may(AclOperation.READ, ResourceType.GROUP, group):
        error = E.GROUP_AUTHORIZATION_FAILED
    else:
        error = ctx.groups.check_group(group, ctx.listener)
    if error is E.NONE and version >= 3:
        error = ctx.groups.check_txn_commit(
            group, request.member_id or "", int(request.generation_id)
        )
    results: dict[TopicPartition, ErrorCode] = {}
    if error is E.NONE:
        readable = topics_allowed(ctx, AclOperation.READ, {tp.topic for tp in offsets})
        results = commit_refusals(offsets, readable, ctx.rm.metadata.partitions)
        allowed = {tp: v for tp, v in offsets.items() if tp not in results}
        if allowed:
            stored = await ctx.groups.offsets.store_txn_offsets(
                group, tid, (int(request.producer_id), int(request.producer_epoch)), allowed
            )
            results.update(dict.fromkeys(allowed, stored))
    by_topic: dict[str, list[Any]] = {}
    for tp in offsets:
        code = results.get(tp, error)
        by_topic.setdefault(tp.topic, []).append(
            _OffsetPartition(partition_index=tp.partition, error_code=int(code))
        )
    return TxnOffsetCommitResponse(
        throttle_time_ms=0,
        topics=[_OffsetTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
    )
