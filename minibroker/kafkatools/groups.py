"""kafka-consumer-groups: Kafka 2.6's ConsumerGroupCommand flags and tables
(docs/kafka-tools-2.6.md §1) over the brokers' Kafka listeners with kafka-python's admin client:
--list [--state], --describe (offsets, --members [--verbose], --state), --reset-offsets,
--delete. As in Kafka, a failure after the flags were read is `\\nError: ...` on stdout with
exit status 0; rows come sorted (Kafka's come in hash order)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.kafkatools.common import ToolError, ToolParser, add_connection, admin
from minibroker.kafkatools.group_tables import (
    STATES,
    members_table,
    offsets_rows,
    offsets_table,
    reset_table,
    state_table,
    states_table,
)

TOOL = "kafka-consumer-groups"
ACTIONS = ("list", "describe", "delete", "reset_offsets")
SCENARIOS = ("to_earliest", "to_latest", "to_current", "to_offset", "shift_by")


def build_parser() -> ToolParser:
    p = ToolParser(TOOL, "List all consumer groups, describe a consumer group, delete consumer "
                   "group info, or reset consumer group offsets.")  # fmt: skip
    add_connection(p, zookeeper=False)
    for action in ACTIONS:
        p.add_argument(f"--{action.replace('_', '-')}", action="store_true")
    p.add_argument("--group", action="append", default=[])
    p.add_argument("--all-groups", action="store_true")
    p.add_argument("--topic", action="append", default=[], help="topic or topic:0,1,2")
    p.add_argument("--all-topics", action="store_true")
    p.add_argument("--members", action="store_true")
    p.add_argument("--offsets", action="store_true")
    p.add_argument("--verbose", action="store_true")
    p.add_argument("--state", nargs="?", const="", default=None)
    p.add_argument("--timeout", type=int, default=5000)
    p.add_argument("--dry-run", action="store_true")
    p.add_argument("--execute", action="store_true")
    p.add_argument("--to-earliest", action="store_true")
    p.add_argument("--to-latest", action="store_true")
    p.add_argument("--to-current", action="store_true")
    p.add_argument("--to-offset", type=int)
    p.add_argument("--shift-by", type=int)
    return p


def _validate(a: dict[str, Any], p: ToolParser) -> str:
    actions = [x for x in ACTIONS if a[x]]
    if len(actions) != 1:
        p.error("Command must include exactly one action: --list, --describe, --delete, "
                "--reset-offsets")  # fmt: skip
    if a["bootstrap_server"] is None:
        p.error('Missing required argument "[bootstrap-server]"')
    action = actions[0]
    if action != "list" and not (a["group"] or a["all_groups"]):
        p.error(f"Option [{action.replace('_', '-')}] takes one of these options: [group], "
                "[all-groups]")  # fmt: skip
    if a["group"] and a["all_groups"]:
        p.error('Option "[group]" can\'t be used with option "[all-groups]"')
    if action == "list" and a["group"]:
        p.error('Option "[group]" can\'t be used with option "[list]"')
    if sum(bool(a[x]) for x in ("members", "offsets")) + (a["state"] is not None) > 1:
        p.error(
            "Option [describe] takes at most one of these options: [members], [offsets], [state]"
        )
    if action == "describe" and a["state"]:
        p.error("Option [describe] does not take a value for [state]")
    if action == "delete" and a["topic"]:
        p.error(
            "The consumer does not support topic-specific offset deletion from a consumer group."
        )
    if action == "reset_offsets":
        if a["execute"] and a["dry_run"]:
            p.error("Option [reset-offsets] only accepts one of [execute] and [dry-run]")
        if sum(a[s] is not None and a[s] is not False for s in SCENARIOS) != 1:
            p.error("--reset-offsets needs one of --to-earliest, --to-latest, --to-current, "
                    "--to-offset, --shift-by")  # fmt: skip
        if not (a["all_topics"] or a["topic"]):
            p.error("One of the reset scopes should be defined: --all-topics, --topic.")
    return action


class Groups:
    """The admin requests the tables need."""

    def __init__(self, client: Any) -> None:
        self.client = client

    def ids(self) -> list[str]:
        return sorted(
            g["group_id"]
            for g in self.client.list_groups()
            if g.get("protocol_type") in ("consumer", "")
        )

    def describe(self, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
        return dict(self.client.describe_groups(list(ids)))

    def committed(self, group: str) -> dict[Any, int]:
        got = self.client.list_group_offsets({group: None}).get(group, {})
        return {tp: o.offset for tp, o in got.items() if o.offset >= 0}

    def offsets(self, tps: Sequence[Any], spec: Any) -> dict[Any, int]:
        if not tps:
            return {}
        got = self.client.list_partition_offsets(dict.fromkeys(tps, spec))
        return {tp: int(getattr(v, "offset", v)) for tp, v in got.items()}

    def coordinator(self, group: str) -> str:
        """host:port (id) of the leader of the group's __consumer_offsets partition (Kafka's
        GroupMetadataManager.partitionFor)."""
        brokers = {b["broker_id"]: b for b in self.client.describe_cluster()["brokers"]}
        topic = self.client.describe_topics(["__consumer_offsets"])[0]
        partition = partition_for(group, len(topic["partitions"]) or 50)
        for p in topic["partitions"]:
            if p["partition_index"] == partition and p["leader_id"] in brokers:
                b = brokers[p["leader_id"]]
                return f"{b['host']}:{b['port']} ({b['broker_id']})"
        return "-"


def _error(message: str) -> None:
    print(f"\nError: {message}")


def _state_ok(group: str, state: str, rows: int) -> bool:
    """ConsumerGroupCommand.shouldPrintMemberState."""
    if state == "Dead":
        _error(f"Consumer group '{group}' does not exist.")
        return False
    if state == "Empty":
        print(f"\nConsumer group '{group}' has no active members.", file=sys.stderr)
    elif state in ("PreparingRebalance", "CompletingRebalance"):
        print(f"\nWarning: Consumer group '{group}' is rebalancing.", file=sys.stderr)
    return rows > 0


def _describe(a: dict[str, Any], groups: Groups, ids: list[str]) -> None:
    from kafka.admin import OffsetSpec

    for group, d in sorted(groups.describe(ids).items()):
        state = d["group_state"]
        if a["state"] is not None:
            if _state_ok(group, state, 1):
                print(state_table(group, groups.coordinator(group), d))
        elif a["members"]:
            if _state_ok(group, state, len(d["members"])):
                print(members_table(group, d["members"], a["verbose"]))
        else:
            committed = groups.committed(group)
            assigned = [tp for m in d["members"] for tp in _assigned(m)]
            ends = groups.offsets(sorted(set(assigned) | set(committed)), OffsetSpec.LATEST)
            rows = offsets_rows(group, d["members"], committed, ends)
            if _state_ok(group, state, len(rows)):
                print(offsets_table(rows))


def _assigned(member: dict[str, Any]) -> list[Any]:
    from kafka import TopicPartition

    return [
        TopicPartition(t["topic"], p)
        for t in (member.get("member_assignment") or {}).get("assigned_partitions", [])
        for p in t["partitions"]
    ]


def _scope(a: dict[str, Any], groups: Groups, group: str) -> list[Any]:
    from kafka import TopicPartition

    if a["all_topics"]:
        return sorted(groups.committed(group))
    out = []
    for spec in a["topic"]:
        topic, _, parts = spec.partition(":")
        if parts:
            out += [TopicPartition(topic, int(p)) for p in parts.split(",")]
        else:
            described = groups.client.describe_topics([topic])[0]
            if described["error_code"]:
                raise ToolError(f"Topic '{topic}' does not exist")
            out += [TopicPartition(topic, p["partition_index"]) for p in described["partitions"]]
    return sorted(out)


def _reset(a: dict[str, Any], groups: Groups, ids: list[str]) -> None:
    from kafka.admin import OffsetSpec
    from kafka.structs import OffsetAndMetadata

    dry_run = a["dry_run"] or not a["execute"]
    if not a["dry_run"] and not a["execute"]:
        print("WARN: No action will be performed as the --execute option is missing.In a future "
              "major release, the default behavior of this command will be to prompt the user "
              "before executing the reset rather than doing a dry run. You should add the "
              "--dry-run option explicitly if you are scripting this command and want to keep "
              "the current default behavior without prompting.", file=sys.stderr)  # fmt: skip
    planned: dict[str, dict[Any, int]] = {}
    for group, d in sorted(groups.describe(ids).items()):
        if d["group_state"] not in ("Empty", "Dead"):
            _error(f"Assignments can only be reset if the group '{group}' is inactive, but the "
                   f"current state is {d['group_state']}.")  # fmt: skip
            planned[group] = {}
            continue
        tps = _scope(a, groups, group)
        start = groups.offsets(tps, OffsetSpec.EARLIEST)
        end = groups.offsets(tps, OffsetSpec.LATEST)
        current = groups.committed(group)
        new: dict[Any, int] = {}
        for tp in tps:
            if a["to_earliest"]:
                target = start[tp]
            elif a["to_latest"]:
                target = end[tp]
            elif a["to_current"]:
                target = current.get(tp, end[tp])
            elif a["to_offset"] is not None:
                target = a["to_offset"]
            else:
                if tp not in current:
                    raise ToolError(f"Cannot shift offset for partition {tp.topic}-{tp.partition} "
                                    "since there is no current committed offset")  # fmt: skip
                target = current[tp] + a["shift_by"]
            new[tp] = min(max(target, start[tp]), end[tp])
        planned[group] = new
        if not dry_run:
            groups.client.alter_group_offsets(
                group, {tp: OffsetAndMetadata(o, "", -1) for tp, o in new.items()}
            )
    print(reset_table(planned))


def _delete(groups: Groups, ids: list[str]) -> None:
    got = groups.client.delete_groups(ids)
    failed = [(g, e) for g, e in _results(got) if e]
    if not failed:
        print(f"Deletion of requested consumer groups ({', '.join(repr(g) for g in ids)}) was "
              "successful.")  # fmt: skip
        return
    _error("Deletion of some consumer groups failed:")
    for group, error in failed:
        print(f"* Group '{group}' could not be deleted due to: {error}")
    deleted = [g for g, e in _results(got) if not e]
    if deleted:
        print("\nThese consumer groups were deleted successfully: "
              + ", ".join(repr(g) for g in deleted))  # fmt: skip


def _results(got: Any) -> list[tuple[str, str]]:
    """delete_groups' answer ({group: "OK" or an error's name}) as (group, error or "")."""
    import kafka.errors

    out = []
    for group, error in dict(got).items():
        if not error or error == "OK":
            out.append((group, ""))
            continue
        cls = getattr(kafka.errors, str(error), None)
        out.append((group, f"{error}: {getattr(cls, 'description', '')}".rstrip(": ")))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    a = vars(parser.parse_args(sys.argv[1:] if argv is None else argv))
    action = _validate(a, parser)
    if a["state"] and any(s not in STATES for s in a["state"].split(",")):
        parser.error(f"Invalid state list '{a['state']}'. Valid states are: {', '.join(STATES)}")
    try:
        client = admin(a["bootstrap_server"], a["command_config"])
    except Exception as exc:
        _error(f"Executing consumer group command failed due to {exc}")
        return 0
    groups = Groups(client)
    try:
        ids = groups.ids() if a["all_groups"] or action == "list" else a["group"]
        if action == "list":
            if a["state"] is None:
                for group in ids:
                    print(group)
            else:
                wanted = set(a["state"].split(",")) if a["state"] else set(STATES)
                found = groups.describe(ids)
                print(states_table([(g, found[g]["group_state"]) for g in ids
                                    if found[g]["group_state"] in wanted]))  # fmt: skip
        elif action == "describe":
            _describe(a, groups, ids)
        elif action == "reset_offsets":
            _reset(a, groups, ids)
        else:
            _delete(groups, ids)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # as ConsumerGroupCommand: stdout, and exit status 0
        _error(f"Executing consumer group command failed due to {exc}")
    finally:
        client.close()
    return 0
