"""`minibroker acls`: Kafka's kafka-acls. By default it writes ZooKeeper as
`kafka-acls --authorizer-properties zookeeper.connect=...` does (the resource's ACL znode by
compare-and-set, then a change notification every broker follows); with `--bootstrap-server`
it goes through a broker's Kafka listener (CreateAcls, DeleteAcls, DescribeAcls), logging in
with `--command-config` or, for a `cluster up --secure` cluster, its DIR/admin.properties.

    minibroker acls add --allow-principal User:alice --operation Read --topic T --group G
    minibroker acls add --allow-principal User:bob --producer --topic T
    minibroker acls remove --allow-principal User:alice --operation Read --topic T
    minibroker acls list [--topic T] [--principal User:alice] [--json]
"""

from __future__ import annotations

import argparse
import json

from minibroker.cli import acls_kafka
from minibroker.cli.locate import add_locate_arguments, zk_connect
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
    binding_problem,
    from_pascal_name,
    pascal_name,
)
from minibroker.localcluster import ClusterError, zk_session
from minibroker.security import acl_store

OPERATIONS = [pascal_name(o) for o in AclOperation if o > AclOperation.ANY]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("acls", help="Kafka ACLs (kafka-acls): add, remove, list")
    asub = p.add_subparsers(dest="acls_command", required=True)
    for name, helptext, func in (
        ("add", "add ACLs", cmd_add),
        ("remove", "remove the ACLs these options name", cmd_remove),
        ("list", "list ACLs, of a resource or all", cmd_list),
    ):
        a = asub.add_parser(name, help=helptext)
        _add_resource_options(a)
        if name == "list":
            a.add_argument("--principal", help="only the ACLs of this principal")
            a.add_argument("--json", action="store_true")
        else:
            _add_entry_options(a)
        a.add_argument(
            "--bootstrap-server",
            help="go through this broker's Kafka listener instead of ZooKeeper",
        )
        add_locate_arguments(a)
        a.set_defaults(func=func)


def _add_resource_options(a: argparse.ArgumentParser) -> None:
    a.add_argument("--topic", action="append", default=[])
    a.add_argument("--group", action="append", default=[])
    a.add_argument("--transactional-id", action="append", default=[])
    a.add_argument("--cluster", action="store_true", help="the Cluster resource")
    a.add_argument(
        "--resource-pattern-type",
        choices=("literal", "prefixed", "any", "match"),
        default=None,
        help="literal (default for add/remove) or prefixed; list also: any (default), match",
    )


def _add_entry_options(a: argparse.ArgumentParser) -> None:
    a.add_argument("--allow-principal", action="append", default=[], metavar="User:NAME")
    a.add_argument("--deny-principal", action="append", default=[], metavar="User:NAME")
    a.add_argument("--allow-host", action="append", default=[])
    a.add_argument("--deny-host", action="append", default=[])
    a.add_argument("--operation", action="append", default=[], choices=OPERATIONS)
    a.add_argument(
        "--producer",
        action="store_true",
        help="Write, Describe, Create on the topics (and IdempotentWrite with --idempotent)",
    )
    a.add_argument(
        "--consumer", action="store_true", help="Read, Describe on topics; Read on groups"
    )
    a.add_argument("--idempotent", action="store_true")


def resource_patterns(args: argparse.Namespace, default: PatternType) -> list[ResourcePattern]:
    pt = PatternType[args.resource_pattern_type.upper()] if args.resource_pattern_type else default
    out = [ResourcePattern(ResourceType.TOPIC, t, pt) for t in args.topic]
    out += [ResourcePattern(ResourceType.GROUP, g, pt) for g in args.group]
    out += [ResourcePattern(ResourceType.TRANSACTIONAL_ID, x, pt) for x in args.transactional_id]
    if args.cluster:
        out.append(ResourcePattern(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL))
    return out


def bindings(args: argparse.Namespace) -> list[AclBinding]:
    """kafka-acls' getAcls / getProducerResourceFilterToAcls / getConsumerResourceFilterToAcls."""
    patterns = resource_patterns(args, PatternType.LITERAL)
    if not patterns:
        raise ClusterError("name a resource: --topic, --group, --transactional-id or --cluster")
    if not args.allow_principal and not args.deny_principal:
        raise ClusterError("name a principal: --allow-principal or --deny-principal User:NAME")
    wanted: list[tuple[ResourcePattern, AclOperation]] = []
    Op, T = AclOperation, ResourceType
    for pattern in patterns:
        ops = [from_pascal_name(AclOperation, o) for o in args.operation]
        if args.producer and pattern.resource_type is T.TOPIC:
            ops += [Op.WRITE, Op.DESCRIBE, Op.CREATE]
        if args.producer and pattern.resource_type is T.TRANSACTIONAL_ID:
            ops += [Op.WRITE, Op.DESCRIBE]
        if args.consumer and pattern.resource_type is T.TOPIC:
            ops += [Op.READ, Op.DESCRIBE]
        if args.consumer and pattern.resource_type is T.GROUP:
            ops += [Op.READ]
        wanted += [(pattern, op) for op in dict.fromkeys(ops)]
    if args.producer and args.idempotent:
        wanted.append((ResourcePattern(T.CLUSTER, CLUSTER_NAME), Op.IDEMPOTENT_WRITE))
    if not wanted:
        raise ClusterError("name an operation: --operation, --producer or --consumer")
    out = []
    for principals, hosts, permission in (
        (args.allow_principal, args.allow_host, AclPermissionType.ALLOW),
        (args.deny_principal, args.deny_host, AclPermissionType.DENY),
    ):
        for principal in principals:
            for host in hosts or ["*"]:
                for pattern, op in wanted:
                    b = AclBinding(pattern, AccessControlEntry(principal, host, op, permission))
                    problem = binding_problem(b)
                    if problem:
                        raise ClusterError(f"cannot make an ACL of {b.pattern}: {problem}")
                    out.append(b)
    return out


def cmd_add(args: argparse.Namespace) -> int:
    wanted = bindings(args)
    if args.bootstrap_server:
        acls_kafka.create(args, wanted)
    else:
        with zk_session(zk_connect(args)) as zk:
            acl_store.ensure_acl_paths(zk)
            acl_store.add_bindings(zk, wanted)
    print(f"added {len(wanted)} ACL(s)")
    _print(wanted)
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    wanted = bindings(args)
    if args.bootstrap_server:
        removed = acls_kafka.delete(args, wanted)
    else:
        removed = []
        with zk_session(zk_connect(args)) as zk:
            for b in wanted:

                def doomed(e: AccessControlEntry, x: AccessControlEntry = b.entry) -> bool:
                    return e == x

                gone, _ = acl_store.remove_entries(zk, b.pattern, doomed)
                removed += [AclBinding(b.pattern, e) for e in gone]
    print(f"removed {len(removed)} ACL(s)")
    _print(removed)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    patterns = resource_patterns(args, PatternType.ANY)
    filters = [
        AclBindingFilter(p.resource_type, p.name, p.pattern_type, principal=args.principal)
        for p in patterns
    ] or [AclBindingFilter(principal=args.principal)]
    if args.bootstrap_server:
        found = acls_kafka.describe(args, filters)
    else:
        with zk_session(zk_connect(args)) as zk:
            every = acl_store.read_all(zk)
        found = [
            AclBinding(p, e)
            for p, entries in sorted(every.items())
            for e in sorted(entries)
            if any(f.matches(AclBinding(p, e)) for f in filters)
        ]
    if args.json:
        print(json.dumps([_json(b) for b in found], indent=2))
    else:
        _print(found)
    return 0


def _json(b: AclBinding) -> dict[str, str]:
    return {
        "resource_type": pascal_name(b.pattern.resource_type),
        "name": b.pattern.name,
        "pattern_type": b.pattern.pattern_type.name,
        "principal": b.entry.principal,
        "host": b.entry.host,
        "operation": pascal_name(b.entry.operation),
        "permission_type": pascal_name(b.entry.permission_type),
    }


def _print(found: list[AclBinding]) -> None:
    """kafka-acls' listing: each resource, then its entries."""
    by_pattern: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for b in found:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for p, entries in sorted(by_pattern.items()):
        print(
            f"Current ACLs for resource `ResourcePattern(resourceType={p.resource_type.name}, "
            f"name={p.name}, patternType={p.pattern_type.name})`:"
        )
        for e in sorted(entries):
            print(
                f"\t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
                f"permissionType={e.permission_type.name})"
            )
