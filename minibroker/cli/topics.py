"""`minibroker topics create|list|describe|elect-preferred|...`: Kafka's kafka-topics in
ZooKeeper mode, its legacy preferred-replica election, kafka-reassign-partitions and
kafka-delete-records. The commands write what Kafka's admin tools
write; the controller acts on it. `describe` adds what each broker reports over DescribeBroker.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from minibroker.cli import delete_records, reassign
from minibroker.cli.locate import add_locate_arguments, registered_address, zk_connect
from minibroker.client.admin import BrokerDescription, BrokerUnreachable, describe_broker
from minibroker.client.admin_zk import (
    all_topics,
    create_topic,
    election_in_progress,
    election_partitions,
    live_brokers,
    read_topic_or_raise,
    request_preferred_replica_election,
    wait_for_leaders,
)
from minibroker.client.topic_changes_zk import add_partitions, mark_for_deletion
from minibroker.client.topic_view import (
    BrokerReports,
    PartitionFilter,
    describe_json,
    describe_lines,
    topic_view,
)
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.topic_config import parse_config_pairs
from minibroker.core.zk_layout import BrokerRegistration
from minibroker.localcluster import ClusterError, zk_session
from minibroker.runtime.waiting import WaitTimeout, wait_until

DEFAULT_WAIT_TIMEOUT_MS = 30_000
# A paused broker accepts the connection and never answers: describe gives up on it after this.
DEFAULT_REQUEST_TIMEOUT_MS = 2_000


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "topics",
        help="create, list, describe, delete, alter and reassign topics; elect preferred leaders",
    )
    tsub = p.add_subparsers(dest="topics_command", required=True)
    _add_create(tsub)
    _add_list(tsub)
    _add_describe(tsub)
    _add_elect(tsub)
    _add_delete(tsub)
    _add_alter(tsub)
    reassign.add_parser(tsub)
    delete_records.add_parser(tsub)


def _add_wait_arguments(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--wait", action="store_true", help=f"wait until {what}")
    p.add_argument(
        "--timeout-ms",
        type=int,
        default=DEFAULT_WAIT_TIMEOUT_MS,
        help=f"how long --wait waits (default {DEFAULT_WAIT_TIMEOUT_MS})",
    )


def _add_create(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser("create", help="write a topic's config and replica assignment")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, help="how many (or give --replica-assignment)")
    p.add_argument("--replication-factor", type=int, help="replicas of each partition")
    p.add_argument(
        "--replica-assignment",
        metavar="B:B,B:B",
        help="kafka-topics' explicit assignment: per partition (comma-separated) its brokers "
        "(colon-separated), the first the preferred leader; instead of the two counts",
    )
    p.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a topic-level override, e.g. min.insync.replicas=2 (repeatable)",
    )
    p.add_argument("--if-not-exists", action="store_true", help="no error if the topic exists")
    _add_wait_arguments(p, "every partition has a leader")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_create)


def _add_list(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser("list", help="every topic's name")
    p.add_argument("--json", action="store_true")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_list)


def _add_describe(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser("describe", help="partitions: leader, ISR, and the brokers' LEO/HW/lag")
    p.add_argument("topic", nargs="?", help="this topic only (default: every topic)")
    filters = p.add_mutually_exclusive_group()
    for which in PartitionFilter:
        filters.add_argument(
            f"--{which.value}", dest="filter", action="store_const", const=which, default=None
        )
    p.add_argument("--json", action="store_true", help="one object per partition")
    p.add_argument(
        "--request-timeout-ms",
        type=int,
        default=DEFAULT_REQUEST_TIMEOUT_MS,
        help=f"per-broker DescribeBroker deadline (default {DEFAULT_REQUEST_TIMEOUT_MS})",
    )
    add_locate_arguments(p)
    p.set_defaults(func=cmd_describe)


def _add_elect(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser(
        "elect-preferred", help="ask the controller to move leadership to preferred replicas"
    )
    p.add_argument("--topic", help="this topic's partitions (default: every topic's)")
    p.add_argument("--partition", type=int, help="only this partition of --topic")
    _add_wait_arguments(p, "the controller has carried the election out")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_elect_preferred)


def _add_delete(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser("delete", help="mark a topic for deletion (the controller deletes it)")
    p.add_argument("topic")
    p.add_argument("--if-exists", action="store_true", help="no error if the topic is unknown")
    _add_wait_arguments(p, "the controller has deleted it everywhere")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_delete)


def _add_alter(tsub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = tsub.add_parser("alter", help="add partitions to a topic (kafka-topics --alter)")
    p.add_argument("topic")
    p.add_argument("--partitions", type=int, required=True, help="the new total")
    _add_wait_arguments(p, "every new partition has a leader")
    add_locate_arguments(p)
    p.set_defaults(func=cmd_alter)


# ---- the commands ------------------------------------------------------------------------------


def parse_replica_assignment(text: str) -> dict[int, tuple[int, ...]]:
    """kafka-topics' `--replica-assignment 1:2,2:3`: partition p's brokers, in order."""
    out = {}
    for p, part in enumerate(text.split(",")):
        brokers = [b.strip() for b in part.split(":")]
        if not all(b.isdigit() for b in brokers):
            raise ClusterError(
                f"--replica-assignment: partition {p} is {part!r}; give broker ids joined by "
                "':' for each partition, partitions joined by ',' (e.g. 1:2,2:3)"
            )
        out[p] = tuple(int(b) for b in brokers)
    return out


def cmd_create(args: argparse.Namespace) -> int:
    config = parse_config_pairs(args.config)
    explicit = None
    if args.replica_assignment:
        explicit = parse_replica_assignment(args.replica_assignment)
    if explicit is not None and (args.partitions or args.replication_factor):
        raise ClusterError("give --replica-assignment or the two counts, not both")
    if explicit is None and (args.partitions is None or args.replication_factor is None):
        raise ClusterError("give --partitions and --replication-factor, or --replica-assignment")
    with zk_session(zk_connect(args)) as zk:
        try:
            create_topic(
                zk, args.topic, args.partitions or 0, args.replication_factor or 0, config,
                random.Random(), replica_assignment=explicit,
            )  # fmt: skip
            print(f"Created topic {args.topic}.", flush=True)
        except ApiError as exc:
            # Kafka's --if-not-exists: an existing topic is silently accepted.
            if not (args.if_not_exists and exc.code is ErrorCode.TOPIC_ALREADY_EXISTS):
                raise
        if args.wait:
            wait_for_leaders(zk, args.topic, args.timeout_ms)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        names = all_topics(zk)
    if args.json:
        print(json.dumps(names))
    elif names:
        print("\n".join(names))
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        names = [args.topic] if args.topic else all_topics(zk)
        infos = [read_topic_or_raise(zk, name) for name in names]
        brokers = live_brokers(zk)
    reports = query_brokers(brokers, args.request_timeout_ms / 1000)
    views = [topic_view(info, reports) for info in infos]
    if args.json:
        print(json.dumps(describe_json(views, args.filter), indent=2))
    else:
        lines = describe_lines(views, args.filter)
        if lines:
            print("\n".join(lines))
    return 0


def cmd_elect_preferred(args: argparse.Namespace) -> int:
    if args.partition is not None and args.topic is None:
        raise ClusterError("--partition needs --topic")
    with zk_session(zk_connect(args)) as zk:
        partitions = election_partitions(zk, args.topic, args.partition)
        if not partitions:
            raise ClusterError("the cluster has no topics: there is nothing to elect")
        request_preferred_replica_election(zk, partitions)
        names = ", ".join(str(tp) for tp in sorted(partitions))
        print(f"Successfully started preferred replica election for partitions {names}.")
        if args.wait:
            _wait(
                lambda: not election_in_progress(zk),
                args.timeout_ms,
                "the controller to carry the election out and delete "
                "/admin/preferred_replica_election (is a controller running?)",
            )
            print("Preferred replica election finished.")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        try:
            marked = mark_for_deletion(zk, args.topic)
        except ApiError as exc:
            if args.if_exists and exc.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                return 0
            raise
        if marked:
            print(f"Topic {args.topic} is marked for deletion.")
        else:
            print(f"Topic {args.topic} is already marked for deletion.")
        if args.wait:
            _wait(
                lambda: args.topic not in all_topics(zk),
                args.timeout_ms,
                f"the controller to delete topic '{args.topic}' (is a broker of it down?)",
            )
            print(f"Topic {args.topic} is deleted.")
    return 0


def cmd_alter(args: argparse.Namespace) -> int:
    with zk_session(zk_connect(args)) as zk:
        add_partitions(zk, args.topic, args.partitions)
        print(f"Adding partitions succeeded! Topic {args.topic} has {args.partitions} now.")
        if args.wait:
            wait_for_leaders(zk, args.topic, args.timeout_ms)
    return 0


# ---- helpers -------------------------------------------------------------------------------------


def query_brokers(brokers: dict[int, BrokerRegistration], timeout_s: float) -> BrokerReports:
    """Every registered broker's DescribeBroker answer, asked in parallel; None for a broker
    that did not answer within `timeout_s` (paused, overloaded or gone meanwhile)."""

    def ask(reg: BrokerRegistration) -> BrokerDescription | None:
        address = registered_address(reg)
        if address is None:
            return None
        try:
            return describe_broker(address, timeout_s=timeout_s)
        except BrokerUnreachable:
            return None

    if not brokers:
        return {}
    with ThreadPoolExecutor(max_workers=len(brokers)) as pool:
        answers = list(pool.map(ask, brokers.values()))
    return dict(zip(brokers, answers, strict=True))


def _wait(condition: Callable[[], bool], timeout_ms: int, what: str) -> None:
    try:
        wait_until(condition, timeout_s=timeout_ms / 1000, what=what, interval_s=0.1)
    except WaitTimeout:
        raise ClusterError(f"timed out after {timeout_ms} ms waiting for {what}") from None
