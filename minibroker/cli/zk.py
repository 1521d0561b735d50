"""`minibroker zk ...`: look at the cluster's ZooKeeper as Kafka's tools would see it."""

from __future__ import annotations

import argparse
import json

from minibroker.cli.locate import add_locate_arguments, zk_connect
from minibroker.core.zk_layout import describe
from minibroker.localcluster import zk_session


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("zk", help="inspect the cluster's ZooKeeper")
    zsub = p.add_subparsers(dest="zk_command", required=True)
    tree = zsub.add_parser("tree", help="every znode with its data (Kafka's JSON)")
    tree.add_argument("--path", default="/", help="subtree to print (default /)")
    tree.add_argument("--json", action="store_true")
    add_locate_arguments(tree)
    tree.set_defaults(func=cmd_tree)


def cmd_tree(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        nodes = list(zk.walk(args.path))
    if args.json:
        out = [
            {
                "path": n.path,
                "data": describe(n.data),
                "version": n.stat.version,
                "czxid": n.stat.czxid,
                "ephemeral_owner": n.stat.ephemeral_owner,
            }
            for n in nodes
        ]
        print(json.dumps(out, indent=2))
        return 0
    for n in nodes:
        data = describe(n.data)
        suffix = "  [ephemeral]" if n.stat.ephemeral else ""
        print(f"{n.path}  {data}{suffix}".rstrip() if data or suffix else n.path)
    return 0
