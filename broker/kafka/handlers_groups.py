"""FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit and OffsetFetch on
the Kafka listener: Kafka 2.6's fields to the group coordinator (broker/groups) and back. A
request for a group this broker does not coordinate is answered NOT_COORDINATOR (the client
asks FindCoordinator again), as in Kafka. Authorization as KafkaApis: READ on the Group for
the membership calls and commits (GROUP_AUTHORIZATION_FAILED), DESCRIBE on it to find its
coordinator or fetch its offsets, and READ (commit) or DESCRIBE (fetch) on each topic."""

from __future__ import annotations

from typing import Any

from kafka.protocol.consumer.group import (
    HeartbeatResponse,
    JoinGroupResponse,
    LeaveGroupResponse,
    OffsetCommitResponse,
    OffsetFetchResponse,
    SyncGroupResponse,
)
from kafka.protocol.metadata.find_coordinator import FindCoordinatorResponse

from broker.kafka.authz import commit_refusals, topics_allowed
from broker.kafka.context import KafkaContext
from minibroker.core.coordinator_log.group_records import OffsetValue
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.types import TopicPartition

GROUP_KEY_TYPE = 0
TXN_KEY_TYPE = 1
NO_OFFSET = -1
GROUP_DENIED = ErrorCode.GROUP_AUTHORIZATION_FAILED
_Member = JoinGroupResponse.JoinGroupResponseMember
_Left = LeaveGroupResponse.MemberResponse
_CommitTopic = OffsetCommitResponse.OffsetCommitResponseTopic
_CommitPartition = _CommitTopic.OffsetCommitResponsePartition
_FetchTopic = OffsetFetchResponse.OffsetFetchResponseTopic
_FetchPartition = _FetchTopic.OffsetFetchResponsePartition


async def handle_find_coordinator(ctx: KafkaContext, request: Any, version: int) -> Any:
    key_type = request.key_type if version >= 1 else GROUP_KEY_TYPE
    error, node = ErrorCode.NONE, None
    if key_type not in (GROUP_KEY_TYPE, TXN_KEY_TYPE):
        error = ErrorCode.INVALID_REQUEST
    elif key_type == TXN_KEY_TYPE and not ctx.may(
        AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, request.key
    ):
        error = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif key_type == GROUP_KEY_TYPE and not _may(ctx, AclOperation.DESCRIBE, request.key):
        error = GROUP_DENIED
    else:
        find = ctx.groups.find if key_type == GROUP_KEY_TYPE else ctx.txns.find
        node_id = await find(request.key, ctx.listener)
        broker = None if node_id is None else ctx.rm.metadata.brokers.get(node_id)
        node = None if broker is None else broker.endpoint_for(ctx.listener)
        if node is None:
            error = ErrorCode.COORDINATOR_NOT_AVAILABLE
    return FindCoordinatorResponse(
        throttle_time_ms=0,
        error_code=int(error),
        error_message=None if error is ErrorCode.NONE else error.name,
        node_id=-1 if node is None else node_id,
        host="" if node is None else node.host,
        port=-1 if node is None else node.port,
    )


def _may(ctx: KafkaContext, operation: AclOperation, group: str) -> bool:
    return ctx.may(operation, ResourceType.GROUP, group)


def _check(ctx: KafkaContext, group: str, operation: AclOperation = AclOperation.READ) -> ErrorCode:
    """GROUP_AUTHORIZATION_FAILED, else the coordinator's own check of the group."""
    if not _may(ctx, operation, group):
        return GROUP_DENIED
    return ctx.groups.check_group(group, ctx.listener)


async def handle_join_group(ctx: KafkaContext, request: Any, version: int) -> Any:
    error = _check(ctx, request.group_id)
    if error is GROUP_DENIED:
        return _join_response(error, "")
    if error is not ErrorCode.NONE:
        return _join_response(error, request.member_id)
    result = await ctx.groups.join(
        request.group_id,
        request.member_id or "",
        client_id=request.header.client_id or "",
        client_host="",
        session_timeout_ms=int(request.session_timeout_ms),
        rebalance_timeout_ms=int(request.rebalance_timeout_ms)
        if version >= 1
        else int(request.session_timeout_ms),
        protocol_type=request.protocol_type,
        protocols=[(p.name, bytes(p.metadata or b"")) for p in request.protocols],
        require_known_member_id=version >= 4,
    )
    return JoinGroupResponse(
        throttle_time_ms=0,
        error_code=int(result.error),
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if version >= 7 else (result.protocol_name or ""),
        leader=result.leader_id,
        member_id=result.member_id,
        members=[
            _Member(member_id=m, group_instance_id=None, metadata=meta)
            for m, meta in result.members
        ],
    )


def _join_response(error: ErrorCode, member_id: str) -> Any:
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=int(error), generation_id=-1, protocol_type=None,
        protocol_name="", leader="", member_id=member_id or "", members=[],
    )  # fmt: skip


async def handle_sync_group(ctx: KafkaContext, request: Any, version: int) -> Any:
    error = _check(ctx, request.group_id)
    assignment = b""
    if error is ErrorCode.NONE:
        error, assignment = await ctx.groups.sync(
            request.group_id,
            request.member_id,
            int(request.generation_id),
            {a.member_id: bytes(a.assignment or b"") for a in request.assignments},
        )
    group = ctx.groups.groups.get(request.group_id)
    return SyncGroupResponse(
        throttle_time_ms=0,
        error_code=int(error),
        protocol_type=group.protocol_type if group else None,
        protocol_name=group.protocol_name if group else None,
        assignment=assignment,
    )


async def handle_heartbeat(ctx: KafkaContext, request: Any, version: int) -> Any:
    error = _check(ctx, request.group_id)
    if error is ErrorCode.NONE:
        error = ctx.groups.heartbeat(
            request.group_id, request.member_id, int(request.generation_id)
        )
    return HeartbeatResponse(throttle_time_ms=0, error_code=int(error))


async def handle_leave_group(ctx: KafkaContext, request: Any, version: int) -> Any:
    member_ids = [m.member_id for m in request.members] if version >= 3 else [request.member_id]
    error = _check(ctx, request.group_id)
    errors = [error] * len(member_ids)
    if error is ErrorCode.NONE:
        errors = ctx.groups.leave(request.group_id, member_ids)
        if version < 3:
            error = errors[0]
    return LeaveGroupResponse(
        throttle_time_ms=0,
        error_code=int(error),
        members=[
            _Left(member_id=m, group_instance_id=None, error_code=int(e))
            for m, e in zip(member_ids, errors, strict=True)
        ],
    )


async def handle_offset_commit(ctx: KafkaContext, request: Any, version: int) -> Any:
    """KafkaApis.handleOffsetCommitRequest: READ on the group first (all partitions refused
    otherwise); then each partition of a topic the principal may not READ, or that the
    metadata cache does not hold, is refused on its own, and only the rest reach the
    coordinator, so a commit naming nothing else is answered without consulting the group."""
    offsets = {
        TopicPartition(t.name, p.partition_index): (
            int(p.committed_offset),
            p.committed_metadata,
            int(getattr(p, "committed_leader_epoch", -1)) if version >= 6 else -1,
        )
        for t in request.topics
        for p in t.partitions
    }
    if not _may(ctx, AclOperation.READ, request.group_id):
        results = dict.fromkeys(offsets, GROUP_DENIED)
    else:
        readable = topics_allowed(ctx, AclOperation.READ, {tp.topic for tp in offsets})
        results = commit_refusals(offsets, readable, ctx.rm.metadata.partitions)
        valid = {tp: o for tp, o in offsets.items() if tp not in results}
        if valid:
            error = ctx.groups.check_group(request.group_id, ctx.listener)
            if error is ErrorCode.NONE:
                error = ctx.groups.check_commit(
                    request.group_id,
                    request.member_id or "",
                    int(request.generation_id_or_member_epoch),
                )
            if error is ErrorCode.NONE:
                results.update(await ctx.groups.ops.commit(request.group_id, valid))
            else:
                results.update(dict.fromkeys(valid, error))
    by_topic: dict[str, list[Any]] = {}
    for tp in offsets:
        by_topic.setdefault(tp.topic, []).append(
            _CommitPartition(partition_index=tp.partition, error_code=int(results[tp]))
        )
    return OffsetCommitResponse(
        throttle_time_ms=0,
        topics=[_CommitTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
    )


async def handle_offset_fetch(ctx: KafkaContext, request: Any, version: int) -> Any:
    wanted = (
        None
        if request.topics is None
        else [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    )
    error = _check(ctx, request.group_id, AclOperation.DESCRIBE)
    if error is GROUP_DENIED and version >= 2:
        return OffsetFetchResponse(throttle_time_ms=0, topics=[], error_code=int(error))
    committed: dict[TopicPartition, OffsetValue] = {}
    if error is ErrorCode.NONE:
        committed = ctx.groups.ops.fetch(request.group_id, wanted)
    tps = wanted if wanted is not None else sorted(committed)
    # Topics the principal may not describe: TOPIC_AUTHORIZATION_FAILED when named, left out
    # silently from an "all partitions" answer (KafkaApis.handleOffsetFetchRequest).
    described = topics_allowed(ctx, AclOperation.DESCRIBE, {tp.topic for tp in tps})
    if wanted is None:
        tps = [tp for tp in tps if tp.topic in described]
    # KIP-447 (v7 require_stable): a partition whose offset a transaction is committing
    # answers UNSTABLE_OFFSET_COMMIT until the transaction's marker lands (getOffsets).
    stable = version >= 7 and bool(getattr(request, "require_stable", False))
    by_topic: dict[str, list[Any]] = {}
    for tp in tps:
        found = None if tp.topic not in described else committed.get(tp)
        denied = tp.topic not in described
        unstable = (
            stable
            and error is ErrorCode.NONE
            and ctx.groups.offsets.has_pending_txn(request.group_id, tp)
        )
        if unstable:
            found = None
        by_topic.setdefault(tp.topic, []).append(
            _FetchPartition(
                partition_index=tp.partition,
                committed_offset=NO_OFFSET if found is None else found.offset,
                committed_leader_epoch=-1 if found is None else found.leader_epoch,
                metadata="" if found is None else found.metadata,
                # Before v2 the error is per partition only.
                error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
                if denied
                else int(ErrorCode.UNSTABLE_OFFSET_COMMIT)
                if unstable
                else (int(error) if version < 2 else 0),
            )
        )
    return OffsetFetchResponse(
        throttle_time_ms=0,
        topics=[_FetchTopic(name=name, partitions=parts) for name, parts in by_topic.items()],
        error_code=int(error),
    )
