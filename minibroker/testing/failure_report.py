"""What a failing test gets to read about its cluster: where it runs, every topic's partitions
as ZooKeeper has them, the timeline since the test started, and each node's last log lines."""

from __future__ import annotations

from minibroker.client.admin_zk import all_topics, read_topic
from minibroker.core.event_kinds import is_routine_event
from minibroker.testing.cluster import Cluster

TAIL_LINES = 15
EVENTS = 200


def failure_report(cluster: Cluster, since_ms: int) -> str:
    """The report; never raises (a cluster half gone says what it could not read)."""
    out: list[str] = []
    deployment = cluster.deployment
    try:
        out.append(deployment.where())
        nodes = deployment.nodes()
    except Exception as exc:  # the report of a failure must not fail
        return f"the cluster cannot be read: {exc}"
    for n in nodes:
        out.append(f"  {n.name:<14} {n.state:<9} {n.where}")
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
    try:
        events = [
            e
            for e in cluster.events(since_ms)
            if e.kind != "log" and not is_routine_event(e.kind, e.get("cause"))
        ]
    except Exception as exc:
        events = []
        out.append(f"(the timeline could not be read: {exc})")
    out.append(
        f"timeline since the test started ({len(events)} events, per-request HW moves left out):"
    )
    out += [f"  {e}" for e in events[-EVENTS:]]
    for n in nodes:
        try:
            tail = deployment.log_tail(n.name, TAIL_LINES)
        except Exception as exc:
            tail = [f"(its log could not be read: {exc})"]
        out.append(f"{n.name}'s last log lines:")
        out += [f"  {line}" for line in tail]
    return "\n".join(out)
