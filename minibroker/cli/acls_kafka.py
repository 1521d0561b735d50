"""`minibroker acls --bootstrap-server`: the ACL requests through a broker's Kafka listener
with kafka-python's admin client (as kafka-acls uses Kafka's AdminClient), logged in with the
client properties of `--command-config`, or of the --dir cluster's admin.properties."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from kafka.admin import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    KafkaAdminClient,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)
from kafka.errors import KafkaError

from minibroker.cli.locate import cluster_dir
from minibroker.core.security import acl as core
from minibroker.localcluster import ClusterError, ClusterState
from minibroker.security.client_config import ClientSecurity, read_properties


def client_security(args: argparse.Namespace) -> ClientSecurity:
    """--command-config, else a secure --dir cluster's admin.properties, else PLAINTEXT."""
    path: Path | None = args.command_config
    if path is None:
        try:
            config = ClusterState.load(cluster_dir(args)).admin_client_config
        except ClusterError:
            config = None
        path = Path(config) if config else None
    if path is None:
        return ClientSecurity()
    try:
        return read_properties(path)
    except (OSError, ValueError) as exc:
        raise ClusterError(f"--command-config {path}: {exc}") from None


def _admin(args: argparse.Namespace) -> KafkaAdminClient:
    try:
        return KafkaAdminClient(
            bootstrap_servers=args.bootstrap_server,
            request_timeout_ms=15000,
            **client_security(args).kafka_python(),
        )
    except KafkaError as exc:
        raise ClusterError(f"cannot reach {args.bootstrap_server}: {exc!r}") from None


def _theirs(b: core.AclBinding) -> ACL:
    p, e = b.pattern, b.entry
    return ACL(
        e.principal, e.host, ACLOperation(int(e.operation)),
        ACLPermissionType(int(e.permission_type)),
        ResourcePattern(ResourceType(int(p.resource_type)), p.name,
                        ACLResourcePatternType(int(p.pattern_type))),
    )  # fmt: skip


def _filter(f: core.AclBindingFilter) -> ACLFilter:
    return ACLFilter(
        f.principal, f.host, ACLOperation(int(f.operation)),
        ACLPermissionType(int(f.permission_type)),
        ResourcePatternFilter(ResourceType(int(f.resource_type)), f.name,
                              ACLResourcePatternType(int(f.pattern_type))),
    )  # fmt: skip


def _ours(acl: Any) -> core.AclBinding:
    rp = acl.resource_pattern
    return core.AclBinding(
        core.ResourcePattern(
            core.ResourceType(int(rp.resource_type)), rp.resource_name,
            core.PatternType(int(rp.pattern_type)),
        ),
        core.AccessControlEntry(
            acl.principal, acl.host, core.AclOperation(int(acl.operation)),
            core.AclPermissionType(int(acl.permission_type)),
        ),
    )  # fmt: skip


def _failed(error: Any) -> bool:
    """kafka-python answers a KafkaError class (NoError for success)."""
    return error is not None and int(getattr(error, "errno", 0) or 0) != 0


def create(args: argparse.Namespace, bindings: list[core.AclBinding]) -> None:
    admin = _admin(args)
    try:
        result = admin.create_acls([_theirs(b) for b in bindings])
    finally:
        admin.close()
    failed = result.get("failed") or []
    if failed:  # kafka-python 3.0 lists the errors' classes (earlier: (acl, error) pairs)
        error = failed[0][1] if isinstance(failed[0], tuple) else failed[0]
        name = getattr(error, "__name__", repr(error))
        raise ClusterError(
            f"CreateAcls refused {len(failed)} ACL(s): {name}: {getattr(error, 'description', '')}"
        )


def delete(args: argparse.Namespace, bindings: list[core.AclBinding]) -> list[core.AclBinding]:
    filters = [
        core.AclBindingFilter(
            b.pattern.resource_type,
            b.pattern.name,
            b.pattern.pattern_type,
            b.entry.principal,
            b.entry.host,
            b.entry.operation,
            b.entry.permission_type,
        )  # fmt: skip
        for b in bindings
    ]
    admin = _admin(args)
    try:
        results = admin.delete_acls([_filter(f) for f in filters])
    finally:
        admin.close()
    removed = []
    for _f, matching, error in results:
        if _failed(error):
            raise ClusterError(f"DeleteAcls: {error!r}")
        removed += [_ours(a) for a in matching]
    return removed


def describe(
    args: argparse.Namespace, filters: list[core.AclBindingFilter]
) -> list[core.AclBinding]:
    admin = _admin(args)
    out: list[core.AclBinding] = []
    try:
        for f in filters:
            acls, error = admin.describe_acls(_filter(f))
            if _failed(error):
                raise ClusterError(f"DescribeAcls: {error!r}")
            out += [_ours(a) for a in acls]
    finally:
        admin.close()
    return sorted(set(out), key=lambda b: (b.pattern, b.entry))
