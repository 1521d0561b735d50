"""kafka-consumer-groups' tables, byte for byte as Kafka 2.6's ConsumerGroupCommand prints
them (docs/kafka-tools-2.6.md §1.3-1.9): column widths, `-` for what is unknown, the empty line
before each header. Pure: rows in, text out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

MISSING = "-"
STATES = ("PreparingRebalance", "CompletingRebalance", "Stable", "Dead", "Empty")


def states_table(rows: Sequence[tuple[str, str]]) -> str:
    width = max([15, *(len(g) for g, _ in rows)])
    return "\n".join(f"{g:<{width}} {s}" for g, s in [("GROUP", "STATE"), *rows])


def _tp_key(tp: Any) -> tuple[str, int]:
    return (tp.topic, tp.partition)


def offsets_rows(
    group: str,
    members: Sequence[Mapping[str, Any]],
    committed: Mapping[Any, int],
    ends: Mapping[Any, int],
) -> list[tuple[str, ...]]:
    """One row per partition a member owns (members with the most partitions first), then
    one per partition with a committed offset and no owner."""
    rows = []
    owned = set()
    by_size = sorted(members, key=lambda m: -sum(len(t["partitions"]) for t in _topics(m)))
    for m in by_size:
        tps = sorted((t["topic"], p) for t in _topics(m) for p in t["partitions"])
        for topic, p in tps:
            owned.add((topic, p))
            rows.append(_row(group, topic, p, committed, ends, m))
    for tp in sorted(committed, key=_tp_key):
        if _tp_key(tp) not in owned:
            rows.append(_row(group, tp.topic, tp.partition, committed, ends, None))
    return rows


def _topics(member: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return list((member.get("member_assignment") or {}).get("assigned_partitions", []))


def _row(
    group: str, topic: str, partition: int, committed: Mapping[Any, int],
    ends: Mapping[Any, int], member: Mapping[str, Any] | None,
) -> tuple[str, ...]:  # fmt: skip
    offset = next((o for tp, o in committed.items() if _tp_key(tp) == (topic, partition)), None)
    end = next((o for tp, o in ends.items() if _tp_key(tp) == (topic, partition)), None)
    lag = end - offset if offset is not None and end is not None else None
    return (
        group, topic, str(partition),
        MISSING if offset is None else str(offset), MISSING if end is None else str(end),
        MISSING if lag is None else str(lag),
        member["member_id"] if member else MISSING, member["client_host"] if member else MISSING,
        member["client_id"] if member else MISSING,
    )  # fmt: skip


def offsets_table(rows: Sequence[tuple[str, ...]]) -> str:
    header = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG",
              "CONSUMER-ID", "HOST", "CLIENT-ID")  # fmt: skip
    g, t, c, h = (max([15, *(len(r[i]) for r in rows)]) for i in (0, 1, 6, 7))
    widths = (g, t, 10, 15, 15, 15, c, h)

    def line(r: Sequence[str]) -> str:
        return " ".join(f"{v:<{w}}" for v, w in zip(r, widths, strict=False)) + " " + r[8]

    return "\n" + "\n".join(line(r) for r in [header, *rows])


def members_table(group: str, members: Sequence[Mapping[str, Any]], verbose: bool) -> str:
    rows = [
        (group, m["member_id"], m["client_host"], m["client_id"],
         str(sum(len(t["partitions"]) for t in _topics(m))), _assignment(m))
        for m in members
    ]  # fmt: skip
    header = ("GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT")
    widths = [max([15, *(len(r[i]) for r in rows)]) for i in range(4)] + [15]

    def line(r: Sequence[str]) -> str:
        text = "".join(f"{v:<{w}} " for v, w in zip(r, widths, strict=False))
        return text + (r[5] if verbose else "")

    return "\n" + "\n".join(line(r) for r in [header, *rows])


def _assignment(member: Mapping[str, Any]) -> str:
    topics = sorted(
        f"{t['topic']}({','.join(map(str, sorted(t['partitions'])))})" for t in _topics(member)
    )
    return ", ".join(topics) or MISSING


def state_table(group: str, coordinator: str, d: Mapping[str, Any]) -> str:
    width = max(25, len(coordinator))
    fmt = f"{{:<{width}}} {{:<25}} {{:<20}} {{:<15}} {{}}"
    return (
        "\n" + fmt.format("GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
        + "\n" + fmt.format(group, coordinator, d.get("protocol_data") or "", d["group_state"],
                            len(d["members"]))
    )  # fmt: skip


def reset_table(planned: Mapping[str, Mapping[Any, int]]) -> str:
    fmt = "{:<30} {:<30} {:<10} {:<15}"
    lines = [fmt.format("GROUP", "TOPIC", "PARTITION", "NEW-OFFSET")] if planned else []
    for group, offsets in planned.items():
        for tp, offset in sorted(offsets.items(), key=lambda kv: _tp_key(kv[0])):
            lines.append(fmt.format(group, tp.topic, tp.partition, offset))
    return "\n" + "\n".join(lines)
