"""ListGroups, DescribeGroups and DeleteGroups on the Kafka listener: what lag tools and test
teardowns use (kafka-consumer-groups, AdminClient.list/describe/delete_consumer_groups). Kafka's
admin clients ask every broker for ListGroups and each group's coordinator for the others; a
broker that does not coordinate a group answers NOT_COORDINATOR for it, as Kafka's does.
Authorization as KafkaApis: ListGroups shows every group with DESCRIBE on the Cluster, else
those the principal may DESCRIBE; DescribeGroups needs DESCRIBE and DeleteGroups DELETE on
each group (GROUP_AUTHORIZATION_FAILED)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.groups import (
    DeleteGroupsResponse,
    DescribeGroupsResponse,
    ListGroupsResponse,
)

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType

_Listed = ListGroupsResponse.ListedGroup
_Described = DescribeGroupsResponse.DescribedGroup
_Member = _Described.DescribedGroupMember
_Deleted = DeleteGroupsResponse.DeletableGroupResult


async def handle_list_groups(ctx: KafkaContext, request: Any, version: int) -> Any:
    # GroupCoordinator.handleListGroups: while a partition loads, its groups are not known.
    loading = ctx.groups.offsets.loading()
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if loading else ErrorCode.NONE
    groups = [] if loading else ctx.groups.ops.list_groups()
    if not ctx.may_cluster(AclOperation.DESCRIBE, log=False):
        visible = ctx.authorizer.allowed_names(
            ctx.session, AclOperation.DESCRIBE, ResourceType.GROUP, [g for g, _, _ in groups],
            log_denied=False,
        )  # fmt: skip
        groups = [g for g in groups if g[0] in visible]
    return ListGroupsResponse(
        throttle_time_ms=0, error_code=int(error),
        groups=[_Listed(group_id=g, protocol_type=t, group_state=s) for g, t, s in groups],
    )  # fmt: skip


async def handle_describe_groups(ctx: KafkaContext, request: Any, version: int) -> Any:
    described = []
    for group_id in request.groups:
        error = ctx.groups.check_group(group_id, ctx.listener)
        if not ctx.may(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        state, group = "Dead", None
        if error is ErrorCode.NONE:
            state, group = ctx.groups.ops.describe(group_id)
        stable = group is not None and state == "Stable"
        protocol = (group.protocol_name if group is not None else None) or ""
        members = [
            _Member(
                member_id=m.member_id,
                group_instance_id=None,
                client_id=m.client_id,
                client_host=m.client_host or "/127.0.0.1",
                # Kafka gives metadata and assignment only once the group is Stable.
                member_metadata=m.metadata(protocol) if stable else b"",
                member_assignment=m.assignment if stable else b"",
            )  # fmt: skip
            for m in (group.members.values() if group is not None else [])
        ]
        protocol_type = group.protocol_type if group is not None else (
            ctx.groups.ops.protocol_type(group_id) if state == "Empty" else ""
        )  # fmt: skip
        described.append(
            _Described(
                error_code=int(error),
                error_message=None,
                group_id=group_id,
                group_state=state,
                protocol_type=protocol_type or "",
                protocol_data=(group.protocol_name or "") if stable and group else "",
                members=members,
                authorized_operations=None,
            )  # fmt: skip
        )
    return DescribeGroupsResponse(throttle_time_ms=0, groups=described)


async def handle_delete_groups(ctx: KafkaContext, request: Any, version: int) -> Any:
    results = []
    for group_id in dict.fromkeys(request.groups_names):
        error = ctx.groups.check_group(group_id, ctx.listener)
        if not ctx.may(AclOperation.DELETE, ResourceType.GROUP, group_id):
            error = ErrorCode.GROUP_AUTHORIZATION_FAILED
        if error is ErrorCode.NONE:
            error = await ctx.groups.ops.delete(group_id)
        results.append(_Deleted(group_id=group_id, error_code=int(error)))
    return DeleteGroupsResponse(throttle_time_ms=0, results=results)
