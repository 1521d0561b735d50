"""What the dashboard shows, as pure functions of what ZooKeeper and the brokers said: the
cluster (brokers, controllers, Kafka's health counts), every partition with each replica's LEO,
HW, lag and time since it last caught up, the change between two states (what is pushed to
the page), and each partition's recent LEO/HW history (the chart). No I/O and no clock here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from minibroker.client.admin import BrokerDescription
from minibroker.client.admin_zk import TopicInfo
from minibroker.client.topic_view import (
    BrokerReports,
    PartitionFilter,
    PartitionView,
    partition_json,
    partition_view,
    topic_min_insync_replicas,
)
from minibroker.core.topic_config import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS
from minibroker.core.types import NO_LEADER, TopicPartition
from minibroker.core.zk_layout import BrokerRegistration

CONTROLLER_ID_BASE = 100  # controller-N has id 100+N (minibroker.localcluster)
# The time since a follower last caught up is shown to the second: finer, it would change at
# every fetch and push every partition to the page every second for nothing.
CAUGHT_UP_GRANULARITY_MS = 1000
HISTORY_WINDOW_MS = 5 * 60_000
UNTHROTTLED = 2**63 - 1  # Kafka's default replication throttle rate (Long.MaxValue)


@dataclass(frozen=True)
class Inputs:
    """One look at the cluster: ZooKeeper's copy and the latest report of each live broker
    (None where it did not answer, with the reason in `report_errors`)."""

    zk_connect: str
    zk_connected: bool
    zk_error: str
    brokers: Mapping[int, tuple[BrokerRegistration, int]]  # id -> (registration, czxid)
    controller: int | None
    controller_epoch: int | None
    controllers: Mapping[int, tuple[str, ...]]  # id -> endpoints
    topics: Sequence[TopicInfo]
    reports: Mapping[int, BrokerDescription | None]
    report_errors: Mapping[int, str] = field(default_factory=dict)
    # Since when (wall-clock ms) each broker holding replicas has not been registered.
    down_since: Mapping[int, int] = field(default_factory=dict)


TXN_MAX_TIMEOUT = "transaction.max.timeout.ms"


def key_of(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def controller_name(controller_id: int) -> str:
    return f"controller-{controller_id - CONTROLLER_ID_BASE}"


def partition_state(
    p: PartitionView,
    leader_report: BrokerDescription | None,
    config: Mapping[str, str] | None = None,
    down_since: Mapping[int, int] | None = None,
) -> dict[str, Any]:
    """`topics describe --json`'s object for `p`, plus what the dashboard draws: per replica
    whether it is in the ISR, how long ago it last caught up (as the leader saw it) or since
    when its broker is down, and whether the partition's replication is throttled."""
    out = partition_json(p)
    out["throttled"] = _throttled(config or {}, p.partition)
    out["key"] = key_of(p.topic, p.partition)
    out["min_insync_replicas"] = p.min_insync_replicas
    out["offline"] = p.matches(PartitionFilter.UNAVAILABLE)
    out["under_replicated"] = len(p.isr) < len(p.replicas)
    out["under_min_isr"] = p.matches(PartitionFilter.UNDER_MIN_ISR)
    desc = (
        leader_report.partitions.get(TopicPartition(p.topic, p.partition))
        if leader_report is not None
        else None
    )
    # An open transaction whose producer has written nothing here for longer than the leader's
    # transaction.max.timeout.ms is hanging: no producer may keep one open that long, so
    # nothing will end it (KIP-664's find-hanging rule; the page compares with its clock).
    max_timeout = None if leader_report is None else leader_report.config.get(TXN_MAX_TIMEOUT)
    out["txn_max_timeout_ms"] = int(max_timeout) if max_timeout else None
    for r in out["replicas_state"]:
        r["in_isr"] = r["broker"] in p.isr
        live = r["live"]
        r["caught_up_ms_ago"] = _caught_up_ms_ago(desc, p.leader, r["broker"]) if live else None
        r["down_since_ms"] = None if live else (down_since or {}).get(r["broker"])
    return out


def _throttled(config: Mapping[str, str], partition: int) -> bool:
    """Whether a throttled-replica list of the topic names this partition (or is `*`)."""
    for name in (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS):
        items = [i.strip() for i in config.get(name, "").split(",") if i.strip()]
        if items == ["*"] or any(i.split(":")[0] == str(partition) for i in items):
            return True
    return False


def _caught_up_ms_ago(desc: Any, leader: int, broker: int) -> int | None:
    if desc is None or not desc.is_leader:
        return None
    if broker == leader:
        return 0
    remote = desc.remote(broker)
    if remote is None or remote.last_caught_up_ms_ago < 0:
        return None
    ago: int = remote.last_caught_up_ms_ago
    return ago - ago % CAUGHT_UP_GRANULARITY_MS


class StateBuilder:
    """Builds the whole state, as `GET /api/state` answers and the page renders, again and
    again: a partition whose inputs (its assignment, its state znode, the replicas' reports,
    the leader's liveness, min.insync.replicas) are what they were last time keeps last time's
    object, so a rebuild of a quiet cluster of thousands of partitions costs little and
    `diff` sees at once what changed."""

    def __init__(self) -> None:
        self._partitions: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}

    def build(self, inputs: Inputs, dirty: Collection[str] | None = None) -> dict[str, Any]:
        """`dirty`: the only partitions ("topic-p") whose inputs may have changed since the last
        build (None: any may have); the others are taken as they were without a look."""
        reports: BrokerReports = {b: inputs.reports.get(b) for b in inputs.brokers}
        partitions = []
        kept: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        for info in inputs.topics:
            min_isr = topic_min_insync_replicas(info, reports)
            for p, replicas in sorted(info.assignment.items()):
                key = key_of(info.topic, p)
                cached = self._partitions.get(key)
                if dirty is not None and cached is not None and key not in dirty:
                    kept[key] = cached
                    partitions.append(cached[1])
                    continue
                tp = TopicPartition(info.topic, p)
                state = info.states.get(p)
                leader = state.leader if state is not None else NO_LEADER
                depends = (
                    replicas,
                    info.adding.get(p),
                    info.removing.get(p),
                    info.config,
                    state,
                    min_isr,
                    leader in reports,
                    tuple(_hosted(reports, b, tp) for b in replicas),
                    _hosted(reports, leader, tp),
                    tuple(inputs.down_since.get(b) for b in replicas),
                )
                if cached is not None and cached[0] == depends:
                    out = cached[1]
                else:
                    leader_report = reports.get(leader) if leader != NO_LEADER else None
                    view = partition_view(info, p, reports, min_isr)
                    out = partition_state(view, leader_report, info.config, inputs.down_since)
                kept[key] = (depends, out)
                partitions.append(out)
        self._partitions = kept
        known = {b for info in inputs.topics for r in info.assignment.values() for b in r}
        brokers = [
            _broker(b, inputs.brokers.get(b), inputs.reports.get(b), inputs.report_errors.get(b))
            for b in sorted(known | set(inputs.brokers))
        ]
        active = inputs.controller
        return {
            "zookeeper": {"connect": inputs.zk_connect, "connected": inputs.zk_connected},
            "banners": banners(inputs),
            "brokers": brokers,
            "controller": {
                "active": active,
                "name": controller_name(active) if active is not None else None,
                "epoch": inputs.controller_epoch,
                "standby": [controller_name(c) for c in sorted(inputs.controllers) if c != active],
            },
            "health": health_counts(partitions),
            "partitions": partitions,
        }


# What a replica's broker said of it: its description, NOT_HOSTED (it answered, without the
# replica), or None (not registered, or it did not answer).
NOT_HOSTED = "not hosted"


def _hosted(reports: BrokerReports, broker: int, tp: TopicPartition) -> Any:
    report = reports.get(broker)
    if report is None:
        return None
    return report.partitions.get(tp, NOT_HOSTED)


def build_state(inputs: Inputs) -> dict[str, Any]:
    """The whole state from scratch (StateBuilder keeps what did not change)."""
    return StateBuilder().build(inputs)


def _broker(
    broker_id: int,
    registered: tuple[BrokerRegistration, int] | None,
    report: BrokerDescription | None,
    error: str | None,
) -> dict[str, Any]:
    return {
        "id": broker_id,
        "name": f"broker-{broker_id}",
        "alive": registered is not None,
        "broker_epoch": registered[1] if registered else None,
        "endpoints": list(registered[0].endpoints) if registered else [],
        "rack": (registered[0].rack or "") if registered else "",
        "answered": report is not None,
        "error": error or "",
        "throttle": _throttle(report),
    }


def _throttle(report: BrokerDescription | None) -> dict[str, int] | None:
    """The replication throttle in force on a broker (KIP-73): its rates in bytes/s and what
    it measured, rounded to the KB/s (so the page is not pushed at every fetch); None when
    neither rate is set."""
    if report is None:
        return None
    leader = int(report.config.get("leader.replication.throttled.rate", UNTHROTTLED))
    follower = int(report.config.get("follower.replication.throttled.rate", UNTHROTTLED))
    if leader >= UNTHROTTLED and follower >= UNTHROTTLED:
        return None
    return {
        "leader_rate": leader,
        "follower_rate": follower,
        "leader_measured": round(report.leader_replication_byte_rate / 1000) * 1000,
        "follower_measured": round(report.follower_replication_byte_rate / 1000) * 1000,
    }


def health_counts(partitions: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Kafka's three cluster-health gauges, summed over the cluster: UnderReplicatedPartitions
    (led by a live broker, ISR smaller than the replicas), UnderMinIsrPartitionCount (ISR below
    min.insync.replicas), OfflinePartitionsCount (no live leader)."""
    return {
        "UnderReplicatedPartitions": sum(
            1 for p in partitions if p["under_replicated"] and not p["offline"]
        ),
        "UnderMinIsrPartitionCount": sum(1 for p in partitions if p["under_min_isr"]),
        "OfflinePartitionsCount": sum(1 for p in partitions if p["offline"]),
    }


def banners(inputs: Inputs) -> list[str]:
    """One line per thing that keeps the page from being current, with what happens next."""
    if not inputs.zk_connected:
        why = inputs.zk_error or "not connected"
        return [f"ZooKeeper at {inputs.zk_connect} is unreachable ({why}); retrying"]
    out = []
    for b in sorted(inputs.brokers):
        if inputs.reports.get(b) is None:
            why = inputs.report_errors.get(b) or "no answer yet"
            out.append(f"broker-{b} is registered but did not answer ({why}); retrying")
    return out


def diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the page needs to go from `old` to `new`: the partitions that changed or went
    away, and the cluster-wide parts that changed; None when nothing did."""
    if old is None:
        return {"full": new}
    before = {p["key"]: p for p in old["partitions"]}
    after = {p["key"]: p for p in new["partitions"]}
    changed = [p for k, p in after.items() if (b := before.get(k)) is not p and b != p]
    removed = [k for k in before if k not in after]
    cluster = {k: v for k, v in new.items() if k != "partitions" and old.get(k) != v}
    if not (changed or removed or cluster):
        return None
    return {"partitions": changed, "removed": removed, "cluster": cluster}


Sample = tuple[int, int | None, dict[int, int | None]]  # (ms, HW, LEO by broker)


@dataclass
class History:
    """Each partition's HW and replicas' LEOs over the last `window_ms`: a sample when one of
    them changed (a quiet partition costs nothing), at the time the dashboard learnt it."""

    window_ms: int = HISTORY_WINDOW_MS
    samples: dict[str, deque[Sample]] = field(default_factory=dict)

    def record(
        self, partitions: Sequence[Mapping[str, Any]], removed: Sequence[str], now_ms: int
    ) -> None:
        """Note the partitions that changed (a patch's) and forget the removed ones."""
        for p in partitions:
            hw = next(
                (r["high_watermark"] for r in p["replicas_state"] if r["broker"] == p["leader"]),
                None,
            )
            leos = {r["broker"]: r["log_end_offset"] for r in p["replicas_state"]}
            series = self.samples.setdefault(p["key"], deque())
            if not series or series[-1][1:] != (hw, leos):
                series.append((now_ms, hw, leos))
            self._trim(series, now_ms)
        for key in removed:
            self.samples.pop(key, None)

    def _trim(self, series: deque[Sample], now_ms: int) -> None:
        # The newest sample older than the window stays: it says where the lines start.
        while len(series) > 1 and series[1][0] < now_ms - self.window_ms:
            series.popleft()

    def of(self, key: str, now_ms: int) -> list[dict[str, Any]]:
        """The samples of one partition within the window, oldest first, as JSON."""
        series = self.samples.get(key)
        if series is None:
            return []
        self._trim(series, now_ms)
        return [
            {"t": t, "hw": hw, "leo": {str(b): v for b, v in leos.items()}}
            for t, hw, leos in series
        ]
