"""CreateAcls, DescribeAcls and DeleteAcls (KafkaApis with AclAuthorizer, Kafka 2.6): ALTER on
the Cluster to create or delete, DESCRIBE to describe (CLUSTER_AUTHORIZATION_FAILED
otherwise), SECURITY_DISABLED without an authorizer. Creations are checked one by one
(INVALID_REQUEST with Kafka's message; a filter-only value such as ANY fails the whole request
with UNKNOWN_SERVER_ERROR, as 2.6 does) and written per resource pattern with a conditional
update and one change notification; the answer waits for the writes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from kafka.protocol.admin.acl import CreateAclsResponse, DeleteAclsResponse, DescribeAclsResponse

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import (
    CLUSTER_NAME,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_errors import ZkError
from minibroker.security import acl_store
from minibroker.security.acl_store import AclUpdateConflict

_Created = CreateAclsResponse.AclCreationResult
_Resource = DescribeAclsResponse.DescribeAclsResource
_Description = _Resource.AclDescription
_FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
_Matching = _FilterResult.DeleteAclsMatchingAcl
NO_AUTHORIZER = "No Authorizer is configured on the broker"


def _enum(enum: Any, code: int) -> Any:
    try:
        return enum(code)
    except ValueError:
        return enum(0)  # UNKNOWN, as Kafka's fromCode


def _binding(c: Any) -> AclBinding:
    return AclBinding(
        ResourcePattern(
            _enum(ResourceType, c.resource_type),
            str(c.resource_name),
            _enum(PatternType, getattr(c, "resource_pattern_type", 3)),
        ),
        AccessControlEntry(
            str(c.principal),
            str(c.host),
            _enum(AclOperation, c.operation),
            _enum(AclPermissionType, c.permission_type),
        ),
    )


def _filter(f: Any) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_enum(ResourceType, f.resource_type_filter),
        name=f.resource_name_filter,
        pattern_type=_enum(PatternType, getattr(f, "pattern_type_filter", 3)),
        principal=f.principal_filter,
        host=f.host_filter,
        operation=_enum(AclOperation, f.operation),
        permission_type=_enum(AclPermissionType, f.permission_type),
    )


def _creation_problem(b: AclBinding) -> tuple[ErrorCode, str] | None:
    p, e = b.pattern, b.entry
    concrete = (
        p.resource_type is not ResourceType.ANY
        and p.pattern_type in (PatternType.LITERAL, PatternType.PREFIXED, PatternType.UNKNOWN)
        and e.operation is not AclOperation.ANY
        and e.permission_type is not AclPermissionType.ANY
    )
    if not concrete:
        return ErrorCode.UNKNOWN_SERVER_ERROR, "ANY and MATCH are only for filters"
    if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return (
            ErrorCode.INVALID_REQUEST,
            "The only valid name for the CLUSTER resource is kafka-cluster",
        )
    if not p.name:
        return ErrorCode.INVALID_REQUEST, "Invalid empty resource name"
    unknown = ResourceType.UNKNOWN, PatternType.UNKNOWN, AclOperation.UNKNOWN
    if any(v in unknown for v in (p.resource_type, p.pattern_type, e.operation)) or (
        e.permission_type is AclPermissionType.UNKNOWN or ":" not in e.principal
    ):
        return ErrorCode.INVALID_REQUEST, "Failed to create ACL"
    return None


async def handle_create_acls(ctx: KafkaContext, request: Any, version: int) -> Any:
    creations = list(request.creations)

    def all_fail(code: ErrorCode, message: str | None) -> Any:
        results = [_Created(error_code=int(code), error_message=message) for _ in creations]
        return CreateAclsResponse(throttle_time_ms=0, results=results)

    if not ctx.may_cluster(AclOperation.ALTER):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    if not ctx.authorizer.enabled:
        return all_fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER + ".")
    bindings = [_binding(c) for c in creations]
    problems = [_creation_problem(b) for b in bindings]
    if any(p is not None and p[0] is ErrorCode.UNKNOWN_SERVER_ERROR for p in problems):
        return all_fail(ErrorCode.UNKNOWN_SERVER_ERROR, "ANY and MATCH are only for filters")
    good = [b for b, p in zip(bindings, problems, strict=True) if p is None]
    write_error: str | None = None
    try:
        written = await asyncio.to_thread(acl_store.add_bindings, ctx.rm.store, good)
        cache = ctx.authorizer.acls
        for pattern, entries in written.items():
            if cache is not None:
                cache.put(pattern, entries)
    except (ZkError, AclUpdateConflict) as exc:
        write_error = str(exc)
    results = []
    for p in problems:
        if p is not None:
            results.append(_Created(error_code=int(p[0]), error_message=p[1]))
        elif write_error is not None:
            results.append(_Created(error_code=-1, error_message=write_error))
        else:
            results.append(_Created(error_code=0, error_message=None))
    if good:
        slog.event(
            "acls_created", principal=ctx.session.principal,
            acls=[f"{b.pattern} {b.entry}" for b in good], error=write_error,
        )  # fmt: skip
    return CreateAclsResponse(throttle_time_ms=0, results=results)


def _grouped(bindings: Sequence[AclBinding]) -> list[Any]:
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    return [
        _Resource(
            resource_type=int(p.resource_type),
            resource_name=p.name,
            pattern_type=int(p.pattern_type),
            acls=[
                _Description(
                    principal=e.principal,
                    host=e.host,
                    operation=int(e.operation),
                    permission_type=int(e.permission_type),
                )
                for e in sorted(entries)
            ],
        )  # fmt: skip
        for p, entries in sorted(by_pattern.items())
    ]


async def handle_describe_acls(ctx: KafkaContext, request: Any, version: int) -> Any:
    def error(code: ErrorCode, message: str | None) -> Any:
        return DescribeAclsResponse(
            throttle_time_ms=0, error_code=int(code), error_message=message, resources=[]
        )

    if not ctx.may_cluster(AclOperation.DESCRIBE):
        return error(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    cache = ctx.authorizer.acls
    if not ctx.authorizer.enabled or cache is None:
        return error(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER)
    f = _filter(request)
    found = [
        AclBinding(p, e) for p, entries in cache.acls.items() for e in entries
        if f.matches(AclBinding(p, e))
    ]  # fmt: skip
    return DescribeAclsResponse(
        throttle_time_ms=0, error_code=0, error_message=None, resources=_grouped(found)
    )


async def handle_delete_acls(ctx: KafkaContext, request: Any, version: int) -> Any:
    filters = [_filter(f) for f in request.filters]

    def all_fail(code: ErrorCode, message: str | None) -> Any:
        return DeleteAclsResponse(
            throttle_time_ms=0,
            filter_results=[
                _FilterResult(error_code=int(code), error_message=message, matching_acls=[])
                for _ in filters
            ],
        )

    if not ctx.may_cluster(AclOperation.ALTER):
        return all_fail(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, None)
    cache = ctx.authorizer.acls
    if not ctx.authorizer.enabled or cache is None:
        return all_fail(ErrorCode.SECURITY_DISABLED, NO_AUTHORIZER + ".")
    try:
        deleted, left = await asyncio.to_thread(_delete, ctx, filters, set(cache.acls))
    except (ZkError, AclUpdateConflict) as exc:
        return all_fail(ErrorCode.UNKNOWN_SERVER_ERROR, str(exc))
    for pattern, entries in left.items():
        cache.put(pattern, entries)
    results = []
    for i in range(len(filters)):
        matching = [
            _Matching(
                error_code=0,
                error_message=None,
                resource_type=int(b.pattern.resource_type),
                resource_name=b.pattern.name,
                pattern_type=int(b.pattern.pattern_type),
                principal=b.entry.principal,
                host=b.entry.host,
                operation=int(b.entry.operation),
                permission_type=int(b.entry.permission_type),
            )  # fmt: skip
            for b in deleted[i]
        ]
        results.append(_FilterResult(error_code=0, error_message=None, matching_acls=matching))
    if any(deleted):
        slog.event(
            "acls_deleted", principal=ctx.session.principal,
            acls=[f"{b.pattern} {b.entry}" for d in deleted for b in d],
        )  # fmt: skip
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=results)


def _delete(
    ctx: KafkaContext, filters: list[AclBindingFilter], cached: set[ResourcePattern]
) -> tuple[list[list[AclBinding]], dict[ResourcePattern, frozenset[AccessControlEntry]]]:
    """AclAuthorizer.deleteAcls: each removed binding counts for the first filter matching
    it; also each touched pattern's entries afterwards."""
    deleted: list[list[AclBinding]] = [[] for _ in filters]
    left: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    # AclAuthorizer also reads the one pattern a precise filter names, cached or not.
    for f in filters:
        if f.resource_type not in (ResourceType.ANY, ResourceType.UNKNOWN) and f.name:
            for pt in (PatternType.LITERAL, PatternType.PREFIXED):
                if f.pattern_type in (pt, PatternType.ANY):
                    cached.add(ResourcePattern(f.resource_type, f.name, pt))
    for pattern in sorted(cached):
        applying = [i for i, f in enumerate(filters) if f.matches_pattern(pattern)]
        if not applying:
            continue

        def doomed(e: AccessControlEntry, applying: list[int] = applying) -> bool:
            return any(filters[i].matches_entry(e) for i in applying)

        removed, left[pattern] = acl_store.remove_entries(ctx.rm.store, pattern, doomed)
        for e in sorted(removed):
            first = next(i for i in applying if filters[i].matches_entry(e))
            deleted[first].append(AclBinding(pattern, e))
    return deleted, left
