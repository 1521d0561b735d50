"""kafka-reassign-partitions: Kafka 2.6's ReassignPartitionsCommand (docs/kafka-tools-2.6.md §6).
--zookeeper runs `minibroker topics reassign` (its ZooKeeper mode: /admin/reassign_partitions);
--bootstrap-server speaks Kafka's Admin API through a broker's Kafka listener
(AlterPartitionReassignments, ListPartitionReassignments, IncrementalAlterConfigs for the
throttles), with the same JSON files and messages."""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path
from typing import Any

from minibroker.client import reassignment_plan
from minibroker.client.topic_changes_zk import proposal
from minibroker.core.broker_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from minibroker.core.topic_config import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS
from minibroker.core.types import TopicPartition
from minibroker.kafkatools.common import ToolError, ToolParser, add_connection, admin, run

TOOL = "kafka-reassign-partitions"
ACTIONS = ("generate", "execute", "verify", "cancel", "list")
Assignment = dict[TopicPartition, tuple[int, ...]]


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "Move partitions between replicas.")
    add_connection(p, zookeeper=True)
    for action in ACTIONS:
        p.add_argument(f"--{action}", action="store_true")
    p.add_argument("--reassignment-json-file", type=Path, metavar="FILE")
    p.add_argument("--topics-to-move-json-file", type=Path, metavar="FILE")
    p.add_argument("--broker-list", metavar="0,1,2")
    p.add_argument("--throttle", type=int, default=-1, metavar="BYTES_PER_S")
    p.add_argument("--timeout", type=int, default=10000, help="accepted (no log-dir moves here)")
    p.add_argument("--additional", action="store_true", help="accepted")
    p.add_argument("--preserve-throttles", action="store_true")
    p.add_argument("--disable-rack-aware", action="store_true", help="accepted; no racks here")
    return p


def _validate(a: dict[str, Any], p: ToolParser) -> str:
    actions = [x for x in ACTIONS if a[x]]
    if len(actions) != 1:
        p.error("Command must include exactly one action: --generate, --execute, --verify, "
                "--cancel, --list")  # fmt: skip
    if a["bootstrap_server"] is None and a["zookeeper"] is None:
        p.error("Please specify --bootstrap-server")
    action = actions[0]
    if action in ("execute", "verify", "cancel") and a["reassignment_json_file"] is None:
        p.error('Missing required argument "[reassignment-json-file]"')
    if action == "generate" and not (a["topics_to_move_json_file"] and a["broker_list"]):
        p.error('Missing required argument "[topics-to-move-json-file],[broker-list]"')
    if a["zookeeper"] and action in ("cancel", "list"):
        p.error(f'Option "[zookeeper]" can\'t be used with action "[{action}]"')
    return action


def _zookeeper(a: dict[str, Any], action: str) -> int:
    """The ZooKeeper mode is `minibroker topics reassign --legacy-znode`'s."""
    from minibroker.cli.reassign import cmd_reassign

    ns = argparse.Namespace(
        zk=a["zookeeper"], bootstrap=None, dir=None, legacy_znode=True, topics=None,
        reassignment_json_file=a["reassignment_json_file"],
        topics_to_move_json_file=a["topics_to_move_json_file"], broker_list=a["broker_list"],
        throttle=a["throttle"], **{x: x == action for x in ACTIONS},
    )  # fmt: skip
    print("Warning: --zookeeper is deprecated, and will be removed in a future version of Kafka.")
    return cmd_reassign(ns)


class AdminReassign:
    def __init__(self, client: Any) -> None:
        self.client = client

    def current(self, topics: list[str]) -> Assignment:
        out: Assignment = {}
        for t in self.client.describe_topics(topics):
            if t["error_code"]:
                raise ToolError(f"Topic {t['name']} does not exist.")
            for p in t["partitions"]:
                out[TopicPartition(t["name"], p["partition_index"])] = tuple(p["replica_nodes"])
        return out

    def ongoing(self) -> dict[TopicPartition, Any]:
        got = self.client.list_partition_reassignments()
        return {TopicPartition(t, p): v for (t, p), v in got.items()}

    def alter(
        self, target: dict[TopicPartition, tuple[int, ...] | None]
    ) -> dict[TopicPartition, str]:
        from kafka import TopicPartition as KTP

        got = self.client.alter_partition_reassignments(
            {
                KTP(tp.topic, tp.partition): (list(r) if r is not None else None)
                for tp, r in target.items()
            }
        )
        errors = {}
        for key, outcome in (got or {}).items():  # None, or the error's class
            if outcome is not None:
                errors[TopicPartition(key.topic, key.partition)] = getattr(
                    outcome, "__name__", str(outcome)
                )
        return errors

    def set_throttles(self, current: Assignment, target: Assignment, rate: int) -> None:
        from kafka.admin import ConfigResource, ConfigResourceType

        lists = reassignment_plan.throttled_replicas(current, target)
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, topic, configs={
                LEADER_THROTTLED_REPLICAS: leader, FOLLOWER_THROTTLED_REPLICAS: follower})
            for topic, (leader, follower) in lists.items()
        ] + [
            ConfigResource(ConfigResourceType.BROKER, str(b), configs={
                LEADER_THROTTLED_RATE: str(rate), FOLLOWER_THROTTLED_RATE: str(rate)})
            for b in sorted(reassignment_plan.reassigning_brokers(current, target))
        ]  # fmt: skip
        self.client.alter_configs(resources, incremental=True, raise_on_unknown=False)

    def clear_throttles(self, topics: list[str], brokers: list[int]) -> None:
        from kafka.admin import ConfigResource, ConfigResourceType

        delete = ("DELETE", None)
        resources = [
            ConfigResource(ConfigResourceType.TOPIC, t, configs={
                LEADER_THROTTLED_REPLICAS: delete, FOLLOWER_THROTTLED_REPLICAS: delete})
            for t in topics
        ] + [
            ConfigResource(ConfigResourceType.BROKER, str(b), configs={
                LEADER_THROTTLED_RATE: delete, FOLLOWER_THROTTLED_RATE: delete})
            for b in brokers
        ]  # fmt: skip
        self.client.alter_configs(resources, incremental=True, raise_on_unknown=False)


def _bootstrap(a: dict[str, Any], action: str, r: AdminReassign) -> int:
    if action == "list":
        ongoing = r.ongoing()
        if not ongoing:
            print("No partition reassignments found.")
            return 0
        print("Current partition reassignments:")
        for tp, o in sorted(ongoing.items()):
            line = f"{tp}: replicas: {_ids(o['replicas'])}."
            line += f" adding: {_ids(o['adding_replicas'])}." if o["adding_replicas"] else ""
            line += f" removing: {_ids(o['removing_replicas'])}." if o["removing_replicas"] else ""
            print(line)
        return 0
    if action == "generate":
        brokers = [int(b) for b in a["broker_list"].split(",") if b.strip()]
        topics = reassignment_plan.parse_topics_to_move(a["topics_to_move_json_file"].read_text())
        current = r.current(topics)
        print("Current partition replica assignment")
        print(reassignment_plan.reassignment_json(current))
        print("\nProposed partition reassignment configuration")
        print(reassignment_plan.reassignment_json(proposal(current, brokers, random.Random())))
        return 0
    target = reassignment_plan.parse_reassignment_json(a["reassignment_json_file"].read_text())
    current = r.current(reassignment_plan.topics_of(target))
    missing = sorted(str(tp) for tp in target if tp not in current)
    if missing:
        raise ToolError(f"The proposed assignment contains non-existent partitions: {missing}")
    if action == "execute":
        print("Current partition replica assignment\n")
        print(reassignment_plan.reassignment_json({tp: current[tp] for tp in target}))
        print("\nSave this to use as the --reassignment-json-file option during rollback")
        if a["throttle"] >= 0:
            r.set_throttles(current, target, a["throttle"])
            print(f"The inter-broker throttle limit was set to {a['throttle']} B/s")
        failed = r.alter(dict(target))
        if failed:
            raise ToolError("Error reassigning partition(s):\n" + "\n".join(
                f"{tp}: {e}" for tp, e in sorted(failed.items())))  # fmt: skip
        print("Successfully started partition reassignment" + ("s" if len(target) > 1 else "")
              + f" for {','.join(str(tp) for tp in sorted(target))}")  # fmt: skip
        return 0
    if action == "cancel":
        failed = r.alter(dict.fromkeys(target))
        cancelled = [str(tp) for tp in sorted(target) if tp not in failed]
        if cancelled:
            plural = "s" if len(cancelled) > 1 else ""
            print(
                f"Successfully cancelled partition reassignment{plural} for: {','.join(cancelled)}"
            )
        else:
            print("None of the specified partition reassignments are active.")
        print("None of the specified partition moves are active.")
        if not a["preserve_throttles"]:
            _clear(r, reassignment_plan.topics_of(target))
        return 0
    ongoing = r.ongoing()
    print("Status of partition reassignment:")
    for tp, replicas in sorted(target.items()):
        if tp in ongoing:
            print(f"Reassignment of partition {tp} is still in progress.")
        elif current.get(tp) == replicas:
            print(f"Reassignment of partition {tp} is complete.")
        else:
            print(f"There is no active reassignment of partition {tp}, but replica set is "
                  f"{_ids(current.get(tp, ()))} rather than {_ids(replicas)}.")  # fmt: skip
    print()  # the replica moves between log directories: none here
    # Kafka clears the throttles only when no reassignment is in progress in the cluster.
    if not ongoing and not a["preserve_throttles"]:
        _clear(r, reassignment_plan.topics_of(target))
    return 0


def _ids(replicas: Any) -> str:
    return ",".join(map(str, replicas))


def _clear(r: AdminReassign, topics: list[str]) -> None:
    brokers = sorted(b["broker_id"] for b in r.client.describe_cluster()["brokers"])
    r.clear_throttles(topics, brokers)
    print(f"Clearing broker-level throttles on broker{'s' if len(brokers) > 1 else ''} "
          f"{_ids(brokers)}")  # fmt: skip
    print(f"Clearing topic-level throttles on topic{'s' if len(topics) > 1 else ''} "
          f"{','.join(topics)}")  # fmt: skip


def _body(argv: list[str]) -> int:
    parser = build_parser()
    a = vars(parser.parse_args(argv))
    action = _validate(a, parser)
    if a["zookeeper"]:
        return _zookeeper(a, action)
    client = admin(a["bootstrap_server"], a["command_config"])
    try:
        return _bootstrap(a, action, AdminReassign(client))
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    return run(TOOL, _body, argv)


if __name__ == "__main__":
    sys.exit(main())
