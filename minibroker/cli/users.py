"""`minibroker users`: SCRAM users, written to ZooKeeper as Kafka 2.6's
`kafka-configs --zookeeper ... --entity-type users --alter --add-config
'SCRAM-SHA-256=[password=...]'` does (the only way 2.6 has): `/config/users/<name>` holds the
salted keys, never the password, and a change notification tells every broker.

    minibroker users add alice --password s3cret [--mechanism SCRAM-SHA-512]
    minibroker users delete alice
    minibroker users list [--json]
"""

from __future__ import annotations

import argparse
import json

from minibroker.cli.locate import add_locate_arguments, zk_connect
from minibroker.core.security.scram import DEFAULT_ITERATIONS, ScramMechanism
from minibroker.localcluster import ClusterError, zk_session
from minibroker.security import user_store


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("users", help="SCRAM users of the Kafka listeners (add, delete, list)")
    usub = p.add_subparsers(dest="users_command", required=True)
    add = usub.add_parser("add", help="add a user, or set a user's password")
    add.add_argument("name")
    add.add_argument("--password", required=True)
    add.add_argument(
        "--mechanism",
        action="append",
        choices=[m.mechanism_name for m in ScramMechanism],
        help="the SCRAM mechanism(s) to store credentials for (default: both)",
    )
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS)
    add_locate_arguments(add)
    add.set_defaults(func=cmd_add)
    delete = usub.add_parser("delete", help="remove a user's SCRAM credentials")
    delete.add_argument("name")
    add_locate_arguments(delete)
    delete.set_defaults(func=cmd_delete)
    ls = usub.add_parser("list", help="users with SCRAM credentials and their mechanisms")
    ls.add_argument("--json", action="store_true")
    add_locate_arguments(ls)
    ls.set_defaults(func=cmd_list)


def cmd_add(args: argparse.Namespace) -> int:
    names = args.mechanism or [m.mechanism_name for m in ScramMechanism]
    mechanisms = tuple(m for m in ScramMechanism if m.mechanism_name in names)
    with zk_session(zk_connect(args)) as zk:
        try:
            user_store.set_password(zk, args.name, args.password, mechanisms, args.iterations)
        except ValueError as exc:
            raise ClusterError(f"users add: {exc}") from None
    print(f"user {args.name}: SCRAM credentials stored for {', '.join(names)}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        if not user_store.delete_user(zk, args.name):
            raise ClusterError(f"no user {args.name!r} with SCRAM credentials (`users list`)")
    print(f"user {args.name}: SCRAM credentials removed")
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        users = user_store.list_users(zk)
    if args.json:
        print(json.dumps({u: list(m) for u, m in sorted(users.items())}, indent=2))
    else:
        for user, mechanisms in sorted(users.items()):
            print(f"{user}\t{','.join(mechanisms)}")
    return 0
