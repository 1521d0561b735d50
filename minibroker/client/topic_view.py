"""What `minibroker topics describe` shows, as pure functions: ZooKeeper's view of a topic joined
with what each broker reports, Kafka's partition filters, and the kafka-topics lines and JSON.
No I/O here: the command gathers the inputs and prints the outputs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from minibroker.client.admin import BrokerDescription, ReplicaDescription
from minibroker.client.admin_zk import TopicInfo
from minibroker.core.topic_config import DEFAULT_MIN_INSYNC_REPLICAS, min_insync_replicas
from minibroker.core.types import NO_LEADER, TopicPartition

# A broker's report: its description, or None when it is registered but did not answer.
BrokerReports = Mapping[int, BrokerDescription | None]


class PartitionFilter(Enum):
    """kafka-topics --describe's partition filters."""

    UNDER_REPLICATED = "under-replicated-partitions"
    UNDER_MIN_ISR = "under-min-isr-partitions"
    AT_MIN_ISR = "at-min-isr-partitions"
    UNAVAILABLE = "unavailable-partitions"


@dataclass(frozen=True)
class ReplicaStatus:
    """One replica as its broker reports it; None where the value is not known.

    `lag` is the leader's LEO minus this replica's LEO as the leader last saw it fetch (0 on
    the leader itself), so it is None when the leader did not answer or the replica's broker
    is not registered (its last fetch says nothing about it now). During a reassignment a
    replica may be `adding` (a new follower, outside the ISR until it catches up) or
    `removing`."""

    broker: int
    reachable: bool
    log_end_offset: int | None
    high_watermark: int | None
    lag: int | None
    live: bool = True
    adding: bool = False
    removing: bool = False
    log_start_offset: int | None = None


@dataclass(frozen=True)
class PartitionView:
    topic: str
    partition: int
    leader: int  # NO_LEADER (-1) when ZooKeeper names none or has no state yet
    leader_epoch: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    replicas_state: tuple[ReplicaStatus, ...]
    min_insync_replicas: int
    leader_is_live: bool
    # The leader's last stable offset and open transactions (producer id, first offset).
    last_stable_offset: int | None = None
    open_transactions: tuple[tuple[int, int, int], ...] = ()

    @property
    def has_leader(self) -> bool:
        return self.leader != NO_LEADER

    def matches(self, which: PartitionFilter) -> bool:
        """Kafka 2.6's TopicCommand rules (PartitionDescription)."""
        if which is PartitionFilter.UNDER_REPLICATED:
            return len(self.isr) < len(self.replicas)
        if which is PartitionFilter.UNDER_MIN_ISR:
            return not self.has_leader or len(self.isr) < self.min_insync_replicas
        if which is PartitionFilter.AT_MIN_ISR:
            return len(self.isr) == self.min_insync_replicas
        return not self.has_leader or not self.leader_is_live


@dataclass(frozen=True)
class TopicView:
    topic: str
    replication_factor: int
    config: Mapping[str, str]
    partitions: tuple[PartitionView, ...]
    marked_for_deletion: bool = False


# ---- joining ZooKeeper's view with the brokers' reports ----------------------------------------


def broker_min_insync_replicas(reports: BrokerReports) -> int:
    """The brokers' min.insync.replicas, from the first broker that answered."""
    for report in reports.values():
        if report is not None and "min.insync.replicas" in report.config:
            try:
                return int(report.config["min.insync.replicas"])
            except ValueError:
                break
    return DEFAULT_MIN_INSYNC_REPLICAS


def _hosted(reports: BrokerReports, broker: int, tp: TopicPartition) -> ReplicaDescription | None:
    report = reports.get(broker)
    return report.partitions.get(tp) if report is not None else None


def _lag(leader: int, leader_report: ReplicaDescription | None, broker: int) -> int | None:
    if leader_report is None or not leader_report.is_leader:
        return None  # no leader, it did not answer, or it has not become leader yet
    if broker == leader:
        return 0
    remote = leader_report.remote(broker)
    if remote is None or remote.log_end_offset < 0:
        return None  # not a follower the leader knows, or it has not fetched yet
    return max(0, leader_report.log_end_offset - remote.log_end_offset)


def replica_statuses(
    tp: TopicPartition,
    replicas: Sequence[int],
    leader: int,
    reports: BrokerReports,
    adding: Sequence[int] = (),
    removing: Sequence[int] = (),
) -> tuple[ReplicaStatus, ...]:
    leader_report = _hosted(reports, leader, tp) if leader != NO_LEADER else None
    out = []
    for b in replicas:
        own = _hosted(reports, b, tp)
        live = b in reports
        out.append(
            ReplicaStatus(
                broker=b,
                reachable=reports.get(b) is not None,
                log_end_offset=own.log_end_offset if own else None,
                high_watermark=own.high_watermark if own else None,
                log_start_offset=own.log_start_offset if own else None,
                lag=_lag(leader, leader_report, b) if live else None,
                live=live,
                adding=b in adding,
                removing=b in removing,
            )
        )
    return tuple(out)


def topic_min_insync_replicas(info: TopicInfo, reports: BrokerReports) -> int:
    """The topic's min.insync.replicas: its own override, else the brokers' setting."""
    return min_insync_replicas(info.config, broker_min_insync_replicas(reports))


def partition_view(
    info: TopicInfo, partition: int, reports: BrokerReports, min_isr: int
) -> PartitionView:
    """One partition of `info` (in its assignment) joined with the brokers' reports."""
    replicas = info.assignment[partition]
    state = info.states.get(partition)
    leader = state.leader if state is not None else NO_LEADER
    own = _hosted(reports, leader, TopicPartition(info.topic, partition))
    if own is None or not own.is_leader:
        own = None
    return PartitionView(
        topic=info.topic,
        partition=partition,
        leader=leader,
        leader_epoch=state.leader_epoch if state is not None else None,
        replicas=tuple(replicas),
        isr=tuple(state.isr) if state is not None else (),
        replicas_state=replica_statuses(
            TopicPartition(info.topic, partition),
            replicas,
            leader,
            reports,
            info.adding.get(partition, ()),
            info.removing.get(partition, ()),
        ),
        min_insync_replicas=min_isr,
        leader_is_live=leader in reports,
        last_stable_offset=own.last_stable_offset if own is not None else None,
        open_transactions=own.open_transactions if own is not None else (),
    )


def topic_view(info: TopicInfo, reports: BrokerReports) -> TopicView:
    """`info` from ZooKeeper; `reports` keyed by every registered (live) broker."""
    min_isr = topic_min_insync_replicas(info, reports)
    partitions = [partition_view(info, p, reports, min_isr) for p in sorted(info.assignment)]
    first = min(info.assignment, default=None)
    return TopicView(
        topic=info.topic,
        replication_factor=len(info.assignment[first]) if first is not None else 0,
        config=dict(info.config),
        partitions=tuple(partitions),
        marked_for_deletion=info.marked_for_deletion,
    )


# ---- output --------------------------------------------------------------------------------------


def _ids(ids: Sequence[int]) -> str:
    return ",".join(str(i) for i in ids)


def _column(statuses: Sequence[ReplicaStatus], value: Callable[[ReplicaStatus], int | None]) -> str:
    # "?" = the broker did not answer; "-" = it answered but does not host the replica.
    def one(s: ReplicaStatus) -> str:
        v = value(s)
        return str(v) if v is not None else ("-" if s.reachable else "?")

    return ",".join(one(s) for s in statuses)


def _lags(statuses: Sequence[ReplicaStatus]) -> str:
    return ",".join("?" if s.lag is None else str(s.lag) for s in statuses)


def header_line(t: TopicView) -> str:
    configs = ",".join(f"{k}={v}" for k, v in sorted(t.config.items()))
    line = (
        f"Topic: {t.topic}\tPartitionCount: {len(t.partitions)}"
        f"\tReplicationFactor: {t.replication_factor}\tConfigs: {configs}"
    )
    return line + ("\tMarkedForDeletion: true" if t.marked_for_deletion else "")


def partition_line(p: PartitionView, marked_for_deletion: bool = False) -> str:
    """Kafka's columns, then minibroker's: the leader epoch and, in Replicas order, each
    replica's log start offset, LEO and HW as its broker reports them and its lag as the
    leader reports it."""
    leader = str(p.leader) if p.has_leader else "none"
    kafka = (
        f"\tTopic: {p.topic}\tPartition: {p.partition}\tLeader: {leader}"
        f"\tReplicas: {_ids(p.replicas)}\tIsr: {_ids(p.isr)}"
    )
    if marked_for_deletion:
        kafka += "\tMarkedForDeletion: true"
    epoch = "none" if p.leader_epoch is None else str(p.leader_epoch)
    return (
        f"{kafka}\tLeaderEpoch: {epoch}"
        f"\tLogStartOffsets: {_column(p.replicas_state, lambda s: s.log_start_offset)}"
        f"\tLogEndOffsets: {_column(p.replicas_state, lambda s: s.log_end_offset)}"
        f"\tHighWatermarks: {_column(p.replicas_state, lambda s: s.high_watermark)}"
        f"\tLags: {_lags(p.replicas_state)}" + _txn_columns(p)
    )


def _txn_columns(p: PartitionView) -> str:
    """The leader's LSO when it reports one, and its open transactions when there are any."""
    out = "" if p.last_stable_offset is None else f"\tLastStableOffset: {p.last_stable_offset}"
    if p.open_transactions:
        out += "\tOpenTransactions: " + ",".join(
            f"{pid}@{first}" for pid, first, _ in p.open_transactions
        )
    return out


def describe_lines(topics: Sequence[TopicView], which: PartitionFilter | None = None) -> list[str]:
    """Without a filter, each topic's header and all its partitions; with one, only the
    matching partitions and no headers (as kafka-topics --describe does)."""
    lines = []
    for t in topics:
        if which is None:
            lines.append(header_line(t))
        lines.extend(
            partition_line(p, t.marked_for_deletion)
            for p in t.partitions
            if which is None or p.matches(which)
        )
    return lines


def partition_json(p: PartitionView) -> dict[str, Any]:
    return {
        "topic": p.topic,
        "partition": p.partition,
        "leader": p.leader if p.has_leader else None,
        "leader_epoch": p.leader_epoch,
        "replicas": list(p.replicas),
        "isr": list(p.isr),
        "last_stable_offset": p.last_stable_offset,
        "open_transactions": [
            {"producer_id": pid, "first_offset": first, "last_timestamp": ts}
            for pid, first, ts in p.open_transactions
        ],
        "replicas_state": [
            {
                "broker": s.broker,
                "log_start_offset": s.log_start_offset,
                "log_end_offset": s.log_end_offset,
                "high_watermark": s.high_watermark,
                "lag": s.lag,
                "reachable": s.reachable,
                "live": s.live,
                "adding": s.adding,
                "removing": s.removing,
            }
            for s in p.replicas_state
        ],
        "reassigning": any(s.adding or s.removing for s in p.replicas_state),
    }


def describe_json(
    topics: Sequence[TopicView], which: PartitionFilter | None = None
) -> list[dict[str, Any]]:
    return [
        partition_json(p) for t in topics for p in t.partitions if which is None or p.matches(which)
    ]
