"""What a failing test gets to read about its cluster: where it runs, every topic's partitions
as ZooKeeper has them, the timeline since the test started, and each node's last log lines."""

from __future__ import annotations

from pathlib import Path

from minibroker.client.admin_zk import all_topics, read_topic
from minibroker.core.event_kinds import is_routine_event
from minibroker.localcluster import TOOL_ROLES, process_state
from minibroker.testing.cluster import Cluster

TAIL_LINES = 15
EVENTS = 200


def _tail(path: str, lines: int = TAIL_LINES) -> list[str]:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError:
        return ["(no log)"]
    return [line[:500] for line in text.splitlines()[-lines:]]


def failure_report(cluster: Cluster, since_ms: int) -> str:
    """The report; never raises (a cluster half gone says what it could not read)."""
    out: list[str] = []
    try:
        state = cluster.state
    except Exception as exc:  # the report of a failure must not fail
        return f"the cluster cannot be read: {exc}"
    out.append(f"cluster: {state.dir} (ZooKeeper {state.zk_connect})")
    for p in state.processes:
        if p.role not in TOOL_ROLES:
            out.append(f"  {p.name:<14} {process_state(p):<8} pid {p.pid}")
    try:
        out.append("partitions (ZooKeeper):")
        for topic in all_topics(cluster.zk):
            info = read_topic(cluster.zk, topic)
            for partition, replicas in info.assignment.items() if info else ():
                s = info.states.get(partition) if info else None
                where = (
                    "no state"
                    if s is None
                    else (f"leader {s.leader}, epoch {s.leader_epoch}, ISR {list(s.isr)}")
                )
                out.append(f"  {topic}-{partition}: replicas {list(replicas)}, {where}")
    except Exception as exc:
        out.append(f"  (ZooKeeper could not be read: {exc})")
    events = [
        e
        for e in cluster.events(since_ms)
        if e.kind != "log" and not is_routine_event(e.kind, e.get("cause"))
    ]
    out.append(
        f"timeline since the test started ({len(events)} events, per-request HW moves left out):"
    )
    out += [f"  {e}" for e in events[-EVENTS:]]
    for p in state.processes:
        if p.role not in TOOL_ROLES:
            out.append(f"{p.name}'s last log lines ({p.log_file}):")
            out += [f"  {line}" for line in _tail(p.log_file)]
    return "\n".join(out)
