"""`minibroker topics reassign`: Kafka's kafka-reassign-partitions (2.6) on a minibroker cluster.

    --generate --topics-to-move-json-file F | --topics T,..  --broker-list 1,2,3
    --execute --reassignment-json-file F [--throttle BYTES_PER_S] [--legacy-znode]
    --verify --reassignment-json-file F      (removes the throttles once every move is done)
    --cancel --reassignment-json-file F
    --list

--execute asks the active controller (AlterPartitionReassignments, as the tool does with
--bootstrap-server) or, with --legacy-znode, writes /admin/reassign_partitions (the tool's
--zookeeper mode). --throttle sets leader.replication.throttled.replicas on the current
replicas and follower.replication.throttled.replicas on the new ones, and both rates on every
broker taking part, as Kafka's tool does.
"""

from __future__ import annotations

import argparse
import asyncio
import random
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from minibroker.cli.locate import add_locate_arguments, zk_connect
from minibroker.client import controller_admin, reassignment_plan, reassignment_throttles
from minibroker.client.admin_zk import all_topics, live_brokers, read_assignment
from minibroker.client.controller_admin import ControllerUnavailable
from minibroker.client.topic_changes_zk import proposal, request_reassignment
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.localcluster import ClusterError, zk_session
from minibroker.runtime.zk_store import ZkStore

T = TypeVar("T")


def add_parser(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser(
        "reassign",
        help="move partitions' replicas between brokers (kafka-reassign-partitions)",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    action = p.add_mutually_exclusive_group(required=True)
    for name, what in (
        ("generate", "propose an assignment over --broker-list"),
        ("execute", "start the reassignment in --reassignment-json-file"),
        ("verify", "say which moves are done; remove the throttles when all are"),
        ("cancel", "cancel the moves in --reassignment-json-file"),
        ("list", "the partitions being reassigned now"),
    ):
        action.add_argument(f"--{name}", action="store_true", help=what)
    p.add_argument("--reassignment-json-file", type=Path, metavar="FILE")
    p.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE")
    p.add_argument("--topics", help="with --generate: comma-separated topics to move")
    p.add_argument("--broker-list", help="with --generate: comma-separated broker ids")
    p.add_argument(
        "--throttle", type=int, default=-1, metavar="BYTES_PER_S",
        help="with --execute: replication throttle for the move, bytes/s per broker",
    )  # fmt: skip
    p.add_argument(
        "--legacy-znode", action="store_true",
        help="with --execute: write /admin/reassign_partitions instead of asking the controller",
    )  # fmt: skip
    add_locate_arguments(p)
    p.set_defaults(func=cmd_reassign)


def cmd_reassign(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        if args.generate:
            return _generate(zk, args)
        if args.list:
            return _list(zk)
        target = _read_file(args)
        if args.execute:
            return _execute(zk, target, args.throttle, args.legacy_znode)
        if args.verify:
            return _verify(zk, target)
        return _cancel(zk, target)


def _read_file(args: argparse.Namespace) -> dict[TopicPartition, tuple[int, ...]]:
    if args.reassignment_json_file is None:
        raise ClusterError("this action needs --reassignment-json-file FILE")
    try:
        text = args.reassignment_json_file.read_text()
    except OSError as exc:
        raise ClusterError(f"cannot read {args.reassignment_json_file}: {exc.strerror}") from None
    return reassignment_plan.parse_reassignment_json(text)


def _current(zk: ZkStore, tps: list[TopicPartition]) -> dict[TopicPartition, tuple[int, ...]]:
    out = {}
    for topic in reassignment_plan.topics_of(tps):
        assignment = read_assignment(zk, topic)
        if assignment is None:
            raise ClusterError(f"Topic '{topic}' does not exist.")
        out.update({TopicPartition(topic, p): r for p, r in assignment.items()})
    return out


def _generate(zk: ZkStore, args: argparse.Namespace) -> int:
    if not args.broker_list:
        raise ClusterError("--generate needs --broker-list 1,2,3")
    brokers = [int(b) for b in args.broker_list.split(",") if b.strip()]
    if args.topics_to_move_json_file is not None:
        topics = reassignment_plan.parse_topics_to_move(args.topics_to_move_json_file.read_text())
    elif args.topics:
        topics = [t.strip() for t in args.topics.split(",") if t.strip()]
    else:
        raise ClusterError("--generate needs --topics-to-move-json-file FILE or --topics T,..")
    unknown = sorted(set(topics) - set(all_topics(zk)))
    if unknown:
        raise ClusterError(f"Topic(s) {', '.join(unknown)} do not exist.")
    current = {}
    for topic in topics:
        current.update(
            {TopicPartition(topic, p): r for p, r in (read_assignment(zk, topic) or {}).items()}
        )
    proposed = proposal(current, brokers, random.Random())
    print("Current partition replica assignment")
    print(reassignment_plan.reassignment_json(current))
    print()
    print("Proposed partition reassignment configuration")
    print(reassignment_plan.reassignment_json(proposed))
    return 0


def _execute(
    zk: ZkStore, target: dict[TopicPartition, tuple[int, ...]], throttle: int, legacy: bool
) -> int:
    current = _current(zk, list(target))
    missing = sorted(str(tp) for tp in target if tp not in current)
    if missing:
        raise ClusterError(f"The proposed assignment contains non-existent partitions: {missing}")
    print("Current partition replica assignment\n")
    print(reassignment_plan.reassignment_json({tp: current[tp] for tp in target}))
    print("\nSave this to use as the --reassignment-json-file option during rollback")
    if throttle >= 0:
        reassignment_throttles.set_throttles(zk, current, target, throttle)
        print(f"The inter-broker throttle limit was set to {throttle} B/s")
    if legacy:
        request_reassignment(zk, target)
    else:
        results = _ask(controller_admin.alter_partition_reassignments(zk, target))
        failed = {tp: o for tp, o in results.items() if o.error is not ErrorCode.NONE}
        if failed:
            lines = [
                f"  {tp}: {o.error.name} {o.message or ''}" for tp, o in sorted(failed.items())
            ]
            raise ClusterError("some reassignments failed:\n" + "\n".join(lines))
    print("Successfully started partition reassignment" + ("s" if len(target) > 1 else "")
          + f" for {','.join(str(tp) for tp in sorted(target))}")  # fmt: skip
    return 0


def _verify(zk: ZkStore, target: dict[TopicPartition, tuple[int, ...]]) -> int:
    ongoing = _ask_list(zk)
    current = _current(zk, list(target))
    done = True
    print("Status of partition reassignment:")
    for tp, replicas in sorted(target.items()):
        if tp in ongoing:
            print(f"Reassignment of partition {tp} is still in progress.")
            done = False
        elif tuple(current.get(tp, ())) == replicas:
            print(f"Reassignment of partition {tp} is complete.")
        else:
            print(f"There is no active reassignment of partition {tp}, but replica set is "
                  f"{list(current.get(tp, ()))} rather than {list(replicas)}.")  # fmt: skip
            done = False
    if done:  # Kafka's tool clears every throttle once the moves are done
        topics, brokers = reassignment_plan.topics_of(target), live_brokers(zk)
        reassignment_throttles.clear_throttles(zk, topics, brokers)
        print("Clearing broker-level throttles on brokers " + ",".join(map(str, brokers)))
        print("Clearing topic-level throttles on topic " + ",".join(topics))
    return 0 if done else 1


def _cancel(zk: ZkStore, target: dict[TopicPartition, tuple[int, ...]]) -> int:
    results = _ask(controller_admin.alter_partition_reassignments(zk, dict.fromkeys(target)))
    cancelled = [tp for tp, o in results.items() if o.error is ErrorCode.NONE]
    idle = [tp for tp, o in results.items() if o.error is ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
    print("Successfully cancelled partition reassignments for: "
          + ",".join(str(tp) for tp in sorted(cancelled)))  # fmt: skip
    if idle:
        print("None of the specified partition moves are active: "
              + ",".join(str(tp) for tp in sorted(idle)))  # fmt: skip
    return 0


def _list(zk: ZkStore) -> int:
    ongoing = _ask_list(zk)
    if not ongoing:
        print("No partition reassignments found.")
    for tp, a in sorted(ongoing.items()):
        print(f"{tp}: replicas: {','.join(map(str, a.replicas))}. "
              f"adding: {','.join(map(str, a.adding))}. "
              f"removing: {','.join(map(str, a.removing))}.")  # fmt: skip
    return 0


def _ask(call: Coroutine[Any, Any, tuple[ErrorCode, str, T]]) -> T:
    try:
        top, message, results = asyncio.run(call)
    except ControllerUnavailable as exc:
        raise ClusterError(f"{exc}; is a controller running?") from None
    if top is not ErrorCode.NONE:
        raise ClusterError(f"the controller answered {top.name}: {message}")
    return results


def _ask_list(zk: ZkStore) -> dict[TopicPartition, controller_admin.Ongoing]:
    return _ask(controller_admin.list_partition_reassignments(zk))
