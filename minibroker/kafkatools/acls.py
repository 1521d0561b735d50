"""kafka-acls: Kafka 2.6's AclCommand flags and blocks (docs/kafka-tools-2.6.md §7) over
minibroker's ACLs: through a broker's Kafka listener (--bootstrap-server: CreateAcls,
DeleteAcls, DescribeAcls) or straight in ZooKeeper (--authorizer-properties
zookeeper.connect=HOST:PORT, as AclAuthorizer stores them). The bindings are
`minibroker acls`' (minibroker/cli/acls.py): one place for --producer/--consumer's rules."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from minibroker.cli import acls as ours
from minibroker.cli import acls_kafka
from minibroker.core.security.acl import AclBinding, AclBindingFilter, PatternType
from minibroker.kafkatools.common import ToolError, ToolParser, add_connection, parse_pairs
from minibroker.localcluster import zk_session
from minibroker.security import acl_store

TOOL = "kafka-acls"


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Add, remove or list ACLs.")
    add_connection(p, zookeeper=False)
    p.add_argument("--authorizer-properties", action="append", default=[], metavar="K=V")
    p.add_argument("--authorizer", help="accepted: kafka.security.authorizer.AclAuthorizer only")
    for action in ("add", "remove", "list"):
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topic", action="append", default=[])
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--transactional-id", action="append", default=[])
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--resource-pattern-type", type=str.lower,
                   choices=("literal", "prefixed", "any", "match"))  # fmt: skip
    p.add_argument("--operation", action="append", default=[], type=_operation)
    p.add_argument("--allow-principal", action="append", default=[])
    p.add_argument("--deny-principal", action="append", default=[])
    p.add_argument("--allow-host", action="append", default=[])
    p.add_argument("--deny-host", action="append", default=[])
    p.add_argument("--principal", help="with --list: only this principal's ACLs")
    p.add_argument("--producer", action="store_true")
    p.add_argument("--consumer", action="store_true")
    p.add_argument("--idempotent", action="store_true")
    p.add_argument("--force", action="store_true", help="no confirmation before --remove")
    return p


def _operation(text: str) -> str:
    """Kafka's names (Read, IdempotentWrite) in any case, as `minibroker acls` spells them."""
    wanted = text.replace("_", "").lower()
    for name in ours.OPERATIONS:
        if name.lower() == wanted:
            return name
    raise argparse.ArgumentTypeError(f"{text}: one of {', '.join(ours.OPERATIONS)}")


def _block(title: str, found: list[AclBinding]) -> None:
    """AclCommand's blocks: `title `R`: ` then each ACL after a TAB, the first after a space,
    a space after the last, and an empty line."""
    by_pattern: dict[Any, list[Any]] = {}
    for b in found:
        by_pattern.setdefault(b.pattern, []).append(b.entry)
    for p, entries in sorted(by_pattern.items()):
        acls = "\n".join(
            f"\t(principal={e.principal}, host={e.host}, operation={e.operation.name}, "
            f"permissionType={e.permission_type.name})"
            for e in sorted(entries)
        )
        resource = (f"ResourcePattern(resourceType={p.resource_type.name}, name={p.name}, "
                    f"patternType={p.pattern_type.name})")  # fmt: skip
        print(f"{title} `{resource}`: \n {acls} \n")


class Store:
    """The ACLs, through a broker (args.bootstrap_server) or in ZooKeeper."""

    def __init__(self, args: argparse.Namespace, zk_connect: str | None) -> None:
        self.args, self.zk_connect = args, zk_connect

    def add(self, wanted: list[AclBinding]) -> None:
        if self.zk_connect is None:
            acls_kafka.create(self.args, wanted)
            return
        with zk_session(self.zk_connect) as zk:
            acl_store.ensure_acl_paths(zk)
            acl_store.add_bindings(zk, wanted)

    def remove(self, wanted: list[AclBinding]) -> None:
        if self.zk_connect is None:
            acls_kafka.delete(self.args, wanted)
            return
        with zk_session(self.zk_connect) as zk:
            for b in wanted:

                def doomed(entry: Any, mine: Any = b.entry) -> bool:
                    return bool(entry == mine)

                acl_store.remove_entries(zk, b.pattern, doomed)

    def list(self, filters: list[AclBindingFilter]) -> list[AclBinding]:
        if self.zk_connect is None:
            return list(acls_kafka.describe(self.args, filters))
        with zk_session(self.zk_connect) as zk:
            every = acl_store.read_all(zk)
        return [
            AclBinding(p, e) for p, entries in sorted(every.items()) for e in sorted(entries)
            if any(f.matches(AclBinding(p, e)) for f in filters)
        ]  # fmt: skip


def _run(args: argparse.Namespace, store: Store) -> int:
    if args.list:
        patterns = ours.resource_patterns(
            args, PatternType.LITERAL if _has_resource(args) else PatternType.ANY
        )
        filters = [
            AclBindingFilter(p.resource_type, p.name, p.pattern_type, principal=args.principal)
            for p in patterns
        ] or [AclBindingFilter(principal=args.principal)]
        if args.principal:
            print(f"ACLs for principal `{args.principal}`")
        _block("Current ACLs for resource", store.list(filters))
        return 0
    if args.resource_pattern_type in ("any", "match") and args.add:
        raise ToolError(f"A '--resource-pattern-type' value of '{args.resource_pattern_type}' is "
                        "not valid when adding acls.")  # fmt: skip
    if not (args.operation or args.producer or args.consumer):
        args.operation = ["All"]  # AclCommand's --operation default
    if args.remove and not (args.allow_principal or args.deny_principal):
        # No principal: every ACL of the named resources (AclCommand.removeAcls).
        patterns = ours.resource_patterns(args, PatternType.LITERAL)
        wanted = store.list([AclBindingFilter(p.resource_type, p.name, p.pattern_type)
                             for p in patterns])  # fmt: skip
    else:
        wanted = ours.bindings(args)
    patterns = sorted({b.pattern for b in wanted})
    filters = [AclBindingFilter(p.resource_type, p.name, p.pattern_type) for p in patterns]
    if args.add:
        _block("Adding ACLs for resource", wanted)
        store.add(wanted)
    else:
        if not args.force:
            print("Are you sure you want to remove ACLs: (y/n)")
            if sys.stdin.readline().strip().lower() != "y":
                return 0
        store.remove(wanted)
    _block("Current ACLs for resource", store.list(filters))
    return 0


def _has_resource(args: argparse.Namespace) -> bool:
    return bool(args.topic or args.group or args.transactional_id or args.cluster)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if sum((args.add, args.remove, args.list)) != 1:
        parser.error("Command must include exactly one action: --list, --add, --remove.")
    try:
        zk_connect = parse_pairs(args.authorizer_properties, "--authorizer-properties").get(
            "zookeeper.connect"
        )
    except ToolError as exc:
        parser.error(str(exc))
    if (args.bootstrap_server is None) == (zk_connect is None):
        parser.error("give --bootstrap-server, or --authorizer-properties zookeeper.connect=...")
    if args.add or args.remove:
        if not _has_resource(args):
            parser.error("You must provide at least one resource: --topic <topic> or --cluster or "
                         "--group <group> or --delegation-token <Delegation Token ID>")  # fmt: skip
        if args.add and not (args.allow_principal or args.deny_principal):
            parser.error("You must specify one of: --allow-principal, --deny-principal when trying "
                         "to add ACLs.")  # fmt: skip
    args.dir = None  # acls_kafka: no --dir cluster; --command-config or PLAINTEXT
    try:
        return _run(args, Store(args, zk_connect))
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # AclCommand: one line on stdout, exit 1
        print(f"Error while executing ACL command: {getattr(exc, 'message', None) or exc}")
        return 1
