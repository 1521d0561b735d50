"""kafka-topics: Kafka 2.6's TopicCommand flags and output (docs/kafka-tools-2.6.md §8) over
minibroker, through a broker's Kafka listener (--bootstrap-server) or ZooKeeper (--zookeeper).
Differences: topics come sorted (Kafka's bootstrap describe prints them in hash order)."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import Any

from minibroker.cli.topics import parse_replica_assignment
from minibroker.kafkatools.common import (
    ToolError,
    ToolParser,
    add_connection,
    admin,
    parse_pairs,
    zookeeper,
)
from minibroker.kafkatools.topic_sources import (
    INTERNAL_TOPICS,
    AdminTopics,
    PartitionDescription,
    TopicDescription,
    ZkTopics,
)
from minibroker.localcluster import ClusterError

Source = ZkTopics | AdminTopics
TOOL = "kafka-topics"
ACTIONS = ("list", "describe", "create", "alter", "delete")
REPORTS = (
    "under_replicated_partitions", "unavailable_partitions", "under_min_isr_partitions",
    "at_min_isr_partitions",
)  # fmt: skip
COLLISION_WARNING = (
    "WARNING: Due to limitations in metric names, topics with a period ('.') or underscore ('_') "
    "could collide. To avoid issues it is best to use either, but not both."
)


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Create, delete, describe, or change a topic.")
    add_connection(p, zookeeper=True)
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--topic", help="the topic (a regular expression, except with --create)")
    p.add_argument("--partitions", type=int)
    p.add_argument("--replication-factor", type=int)
    p.add_argument("--replica-assignment", help="broker_id_for_part1_replica1:..., ...")
    p.add_argument("--config", action="append", default=[], metavar="NAME=VALUE")
    p.add_argument("--delete-config", action="append", default=[], metavar="NAME")
    for report in REPORTS:
        p.add_argument(f"--{report.replace('_', '-')}", action="store_true")
    p.add_argument("--topics-with-overrides", action="store_true")
    p.add_argument("--if-exists", action="store_true")
    p.add_argument("--if-not-exists", action="store_true")
    p.add_argument("--exclude-internal", action="store_true")
    p.add_argument("--disable-rack-aware", action="store_true", help="accepted; no racks here")
    p.add_argument("--force", action="store_true", help="accepted, unused (as in Kafka)")
    return p


def topic_matcher(pattern: str | None) -> re.Pattern[str]:
    """Kafka's Whitelist: commas are alternatives, spaces and quotes dropped, a full match."""
    if pattern is None:
        return re.compile(".*")
    cleaned = pattern.strip().strip("'\"").replace(" ", "").replace(",", "|")
    try:
        return re.compile(cleaned)
    except re.error as exc:
        raise ToolError(f"{pattern} is an invalid regex: {exc}") from None


def parse_assignment(text: str) -> dict[int, list[int]]:
    """--replica-assignment 0:1:2,1:2:0, read as `minibroker topics create` reads it."""
    try:
        return {p: list(r) for p, r in parse_replica_assignment(text).items()}
    except ClusterError as exc:
        raise ToolError(str(exc)) from None


def _validate(args: object, p: ToolParser) -> str:
    a = vars(args)
    actions = [x for x in ACTIONS if a[x]]
    if len(actions) != 1:
        p.error(
            "Command must include exactly one action: "
            "--list, --describe, --create, --alter or --delete"
        )
    if (a["bootstrap_server"] is None) == (a["zookeeper"] is None):
        p.error("Only one of --bootstrap-server or --zookeeper must be specified")
    action = actions[0]
    if action in ("create", "alter", "delete") and not a["topic"]:
        p.error(f'Missing required argument "[topic]" for --{action}')
    if sum(a[r] for r in REPORTS) > 1 or (any(a[r] for r in REPORTS) and action != "describe"):
        p.error("the report options go with --describe, one at a time")
    if a["zookeeper"] and (a["under_min_isr_partitions"] or a["at_min_isr_partitions"]):
        p.error(
            "--under-min-isr-partitions and --at-min-isr-partitions "
            "are not supported with --zookeeper"
        )
    if a["bootstrap_server"] and action == "alter" and (a["config"] or a["delete_config"]):
        p.error(
            'Option combination "[bootstrap-server],[config]" can\'t be used with option "[alter]"'
        )
    if a["bootstrap_server"] and a["delete_config"]:
        p.error('Option "[delete-config]" can\'t be used with option "[bootstrap-server]"')
    return action


def _partition_line(t: TopicDescription, p: PartitionDescription) -> str:
    line = (
        f"\tTopic: {t.name}\tPartition: {p.partition}\t"
        f"Leader: {'none' if p.leader is None else p.leader}\t"
        f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}"
    )
    if p.adding or p.removing:
        line += f"\tAdding Replicas: {','.join(map(str, p.adding))}"
        line += f"\tRemoving Replicas: {','.join(map(str, p.removing))}"
    return line + ("\tMarkedForDeletion: true" if t.marked_for_deletion else "")


def _shown(t: TopicDescription, p: PartitionDescription, report: str | None) -> bool:
    """TopicCommand.DescribeOptions: which partition lines a report option keeps."""
    min_isr = t.min_insync_replicas
    if report is None:
        return True
    if report == "under_replicated_partitions":
        return len(p.replicas) - len(p.adding) - len(p.isr) > 0
    if report == "unavailable_partitions":
        return p.leader is None or p.leader not in t.live_brokers
    if report == "under_min_isr_partitions":
        return p.leader is None or (min_isr is not None and len(p.isr) < min_isr)
    return min_isr is not None and len(p.isr) == min_isr


def describe_lines(
    topics: Sequence[TopicDescription], report: str | None, overrides: bool
) -> list[str]:
    out = []
    for t in topics:
        if overrides and not t.configs:
            continue
        if report is None:
            configs = ",".join(f"{k}={v}" for k, v in t.configs)
            out.append(
                f"Topic: {t.name}\tPartitionCount: {len(t.partitions)}\t"
                f"ReplicationFactor: {t.replication_factor}\tConfigs: {configs}"
                + ("\tMarkedForDeletion: true" if t.marked_for_deletion else "")
            )
        if not overrides:
            out += [_partition_line(t, p) for p in t.partitions if _shown(t, p, report)]
    return out


PARTITIONS_WARNING = (
    "WARNING: If partitions are increased for a topic that has a key, the partition logic or "
    "ordering of the messages will be affected"
)


def _create(a: dict[str, Any], source: Source) -> None:
    name = a["topic"]
    if "." in name or "_" in name:
        print(COLLISION_WARNING)
    if a["if_not_exists"] and any(n == name for n, _ in source.names()):
        return
    explicit = a["replica_assignment"]
    if source.zookeeper and not explicit and not (a["partitions"] and a["replication_factor"]):
        raise ToolError("--partitions and --replication-factor are required with --zookeeper")
    configs = parse_pairs(a["config"], "--config")
    assignment = parse_assignment(explicit) if explicit else None
    source.create(name, a["partitions"], a["replication_factor"], configs, assignment)
    print(f"Created topic {name}.")


def _alter(a: dict[str, Any], source: Source, names: list[str]) -> None:
    if a["config"] or a["delete_config"]:
        raise ToolError("--alter --config is deprecated in Kafka: use kafka-configs --alter")
    if a["partitions"] is None:
        raise ToolError("--alter needs --partitions (the new total)")
    explicit = a["replica_assignment"]
    assignment = list(parse_assignment(explicit).values()) if explicit else None
    for n in names:
        if n in INTERNAL_TOPICS:
            raise ToolError(
                f"The number of partitions for the internal topic {n} cannot be changed."
            )
        if source.zookeeper:
            print(PARTITIONS_WARNING)
        source.add_partitions(n, a["partitions"], assignment)
        if source.zookeeper:
            print("Adding partitions succeeded!")


def _delete(source: Source, names: list[str]) -> None:
    for n in names:
        if n in INTERNAL_TOPICS:
            raise ToolError(
                f"Topic {n} is a kafka internal topic and is not allowed to be marked for deletion."
            )
        marked = source.delete(n)
        if source.zookeeper and marked:
            print(f"Topic {n} is marked for deletion.")
            print("Note: This will have no impact if delete.topic.enable is not set to true.")
        elif source.zookeeper:
            print(f"Topic {n} is already marked for deletion.")


def _run(a: dict[str, Any], action: str, source: Source) -> None:
    if action == "create":
        _create(a, source)
        return
    matcher = topic_matcher(a["topic"])
    found = [(n, marked) for n, marked in source.names() if matcher.fullmatch(n)]
    if a["exclude_internal"]:
        found = [(n, m) for n, m in found if n not in INTERNAL_TOPICS]
    names = [n for n, _ in found]
    if not names and a["topic"] and action != "list":
        if a["if_exists"]:
            return
        raise ToolError(f"Topic '{a['topic']}' does not exist as expected")
    if action == "list":
        for n, marked in found:
            print(f"{n} - marked for deletion" if marked and source.zookeeper else n)
    elif action == "describe":
        report = next((r for r in REPORTS if a[r]), None)
        for line in describe_lines(source.describe(names), report, a["topics_with_overrides"]):
            print(line)
    elif action == "alter":
        _alter(a, source, names)
    else:
        _delete(source, names)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    action = _validate(args, parser)
    try:
        if args.zookeeper:
            with zookeeper(args.zookeeper) as zk:
                _run(vars(args), action, ZkTopics(zk))
        else:
            client = admin(args.bootstrap_server, args.command_config)
            try:
                _run(vars(args), action, AdminTopics(client))
            finally:
                client.close()
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # TopicCommand: any failure is one line on stdout, exit 1
        print(f"Error while executing topic command : {exc}")
        return 1
    return 0
