"""Waiting for replication states with a deadline. Each wait returns the event it waited for
(from the merged timeline), or raises WaitTimeout saying what it saw instead: the partition's
state in ZooKeeper and its latest events."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from minibroker.client.admin_zk import all_topics, read_topic
from minibroker.client.event_text import clock
from minibroker.core.types import TopicPartition
from minibroker.runtime.waiting import WaitTimeout, wait_until
from minibroker.runtime.zk_store import ZkStore
from minibroker.testing.timeline import Event, of_kind
from minibroker.testing.views import PartitionState

POLL_S = 0.1
SEEN = 6  # events quoted in a timeout's message


class Watched(Protocol):
    """What the waits read of a cluster (minibroker.testing.Cluster)."""

    last_fault_ms: int

    @property
    def zk(self) -> ZkStore: ...

    def events(self, since: int | None = None, *kinds: str) -> list[Event]: ...

    def partition(self, topic: str, partition: int = 0) -> PartitionState: ...


def _first(c: Watched, since: int, kinds: Sequence[str], tp: str | None) -> Event | None:
    found = of_kind(c.events(since), *kinds, tp=tp)
    return found[0] if found else None


def _seen(c: Watched, since: int, tp: str | None) -> str:
    about = [e for e in c.events(since) if e.kind != "log" and (tp is None or e.tp == tp)]
    if not about:
        return "no event" + (f" about {tp}" if tp else "") + " since then"
    return "the latest events:\n  " + "\n  ".join(str(e) for e in about[-SEEN:])


def _wait_for_event(
    c: Watched, kinds: Sequence[str], tp: str | None, since: int | None, timeout_s: float,
    what: str,
) -> Event:  # fmt: skip
    start = c.last_fault_ms if since is None else since
    try:
        return wait_until(
            lambda: _first(c, start, kinds, tp), timeout_s=timeout_s, what=what, interval_s=POLL_S
        )
    except WaitTimeout:
        raise WaitTimeout(
            f"no {what} within {timeout_s:g} s (since {clock(start)}); {_seen(c, start, tp)}"
        ) from None


def _zk_state(c: Watched, topic: str, partition: int) -> str:
    s = c.zk.read_partition_state(TopicPartition(topic, partition))
    if s is None:
        return f"ZooKeeper has no state for {topic}-{partition}"
    return f"now leader {s.leader}, ISR {list(s.isr)}, leader epoch {s.leader_epoch}"


def isr_change(
    c: Watched, kind: str, topic: str, partition: int, since: int | None, timeout_s: float
) -> Event:
    """The first `isr_shrink` or `isr_expand` of the partition since `since`. A shrink is the
    leader's, or the controller's removal of a broker whose session expired."""
    tp = f"{topic}-{partition}"
    what = f"{kind.replace('_', ' ')} of {tp}"
    kinds = (kind, "replica_removed_from_isr") if kind == "isr_shrink" else (kind,)
    try:
        return _wait_for_event(c, kinds, tp, since, timeout_s, what)
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}\n{_zk_state(c, topic, partition)}") from None


def new_leader(
    c: Watched, topic: str, partition: int, since: int | None, timeout_s: float
) -> Event:
    """The controller's first leader election of the partition since `since`."""
    tp = f"{topic}-{partition}"
    try:
        return _wait_for_event(c, ("leader_elected",), tp, since, timeout_s, f"new leader of {tp}")
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}\n{_zk_state(c, topic, partition)}") from None


def controller_change(c: Watched, since: int | None, timeout_s: float) -> Event:
    """The first controller election since `since`."""
    try:
        return _wait_for_event(
            c, ("controller_elected",), None, since, timeout_s, "controller election"
        )
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc}\nactive controller now: {c.zk.read_controller()}") from None


def _lagging(zk: ZkStore, topics: Sequence[str]) -> list[str]:
    """Partitions without a leader or with a replica out of the ISR, described."""
    out = []
    for topic in topics or all_topics(zk):
        info = read_topic(zk, topic)
        if info is None:
            out.append(f"{topic}: no such topic")
            continue
        for p, replicas in info.assignment.items():
            s = info.states.get(p)
            if s is None or s.leader < 0 or set(s.isr) != set(replicas):
                isr = "no state" if s is None else f"leader {s.leader}, ISR {list(s.isr)}"
                out.append(f"{topic}-{p} (replicas {list(replicas)}, {isr})")
    return out


def fully_replicated(
    c: Watched, topics: Sequence[str], timeout_s: float
) -> dict[str, list[PartitionState]]:
    """Every partition of `topics` (default: every topic) led with all its replicas in the
    ISR; then each partition's state, replicas' LEO and HW included."""
    try:
        wait_until(lambda: not _lagging(c.zk, topics), timeout_s=timeout_s, what="",
                   interval_s=POLL_S)  # fmt: skip
    except WaitTimeout:
        left = _lagging(c.zk, topics)
        raise WaitTimeout(
            f"not fully replicated within {timeout_s:g} s: {'; '.join(left[:10])}"
            + (f" and {len(left) - 10} more" if len(left) > 10 else "")
        ) from None
    out: dict[str, list[PartitionState]] = {}
    for topic in topics or all_topics(c.zk):
        info = read_topic(c.zk, topic)
        if info is not None:
            out[topic] = [c.partition(topic, p) for p in info.assignment]
    return out
