"""What a scenario run recorded, as plain values: the verifying producer's sends, the verifying
consumer's fetches, the HW monitor's samples, ZooKeeper's history and every replica's log.
Pure data, no I/O: the invariants are functions of a History, so tests build one by hand.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Produced:
    """One record the verifying producer sent (acks=all), and what became of it."""

    seq: int
    partition: int
    value: str
    sent_ms: int
    outcome: str = "pending"  # "acked" | "failed" | "pending" (never answered)
    offset: int = -1
    done_ms: int = 0
    error: str = ""  # the ErrorCode name of a failed send


@dataclass(frozen=True)
class FetchRead:
    """One Fetch response the verifying consumer got: the HW it carried and the offsets of the
    records it returned (first..last, `count` of them; none on an error)."""

    ts_ms: int
    broker: int
    partition: int
    fetch_offset: int
    high_watermark: int
    error: str = "NONE"
    first_offset: int = -1
    last_offset: int = -1
    count: int = 0


@dataclass(frozen=True)
class HwSample:
    """One partition as a broker described itself at `ts_ms` (DescribeBroker), `life` being
    the broker epoch of the process that answered."""

    ts_ms: int
    broker: int
    life: int
    partition: int
    is_leader: bool
    leader: int
    leader_epoch: int
    high_watermark: int
    log_end_offset: int
    isr: tuple[int, ...]


@dataclass(frozen=True)
class PartitionStateChange:
    """A version of /brokers/topics/<t>/partitions/<p>/state (zk_version -1: not there)."""

    ts_ms: int
    partition: int
    zk_version: int
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int


@dataclass(frozen=True)
class ControllerChange:
    """/controller (None: no controller) and /controller_epoch as observed together."""

    ts_ms: int
    controller_id: int | None
    controller_epoch: int


@dataclass(frozen=True)
class BrokersChange:
    """/brokers/ids: the registered brokers with their broker epochs (czxids)."""

    ts_ms: int
    brokers: dict[int, int]
    cversion: int


@dataclass(frozen=True)
class ZkGap:
    """Versions of a znode the recorder never saw (two changes between two reads): those
    after `after_version`, the last one accounted for, and before `seen_version`."""

    ts_ms: int
    path: str
    after_version: int
    seen_version: int

    @property
    def missed(self) -> int:
        return self.seen_version - self.after_version - 1


@dataclass(frozen=True)
class ReplicaBatch:
    """One record batch in a replica's segment files, as the invariants compare batches."""

    base_offset: int
    last_offset: int
    leader_epoch: int
    crc: int


@dataclass
class ReplicaLog:
    """One replica's log as read from its files after the run: batches in offset order, the
    values at each offset, its leader-epoch checkpoint and its HW (as it last reported it,
    else its replication-offset-checkpoint; None when neither is known)."""

    broker: int
    partition: int
    batches: list[ReplicaBatch] = field(default_factory=list)
    values: dict[int, str] = field(default_factory=dict)
    epochs: list[tuple[int, int]] = field(default_factory=list)  # (epoch, start offset)
    high_watermark: int | None = None
    error: str = ""  # why the files could not be read (fully)

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else 0


@dataclass
class FinalState:
    """Each partition's leader, ISR and leader HW once the cluster was quiet, before the logs
    were read; and what the validating read found (offset -> value) up to that HW."""

    leader: dict[int, int] = field(default_factory=dict)
    isr: dict[int, tuple[int, ...]] = field(default_factory=dict)
    high_watermark: dict[int, int] = field(default_factory=dict)
    read: dict[int, dict[int, str]] = field(default_factory=dict)


@dataclass
class History:
    """Everything one run recorded, for one topic."""

    topic: str
    assignment: dict[int, tuple[int, ...]]  # partition -> replicas, in assignment order
    produced: list[Produced] = field(default_factory=list)
    reads: list[FetchRead] = field(default_factory=list)
    hw_samples: list[HwSample] = field(default_factory=list)
    states: list[PartitionStateChange] = field(default_factory=list)
    controllers: list[ControllerChange] = field(default_factory=list)
    brokers: list[BrokersChange] = field(default_factory=list)
    zk_gaps: list[ZkGap] = field(default_factory=list)
    logs: list[ReplicaLog] = field(default_factory=list)
    final: FinalState = field(default_factory=FinalState)
    # Declared by the scenario: acked records an unclean election discards are expected.
    unclean_loss_expected: bool = False

    def tp_name(self, partition: int) -> str:
        return f"{self.topic}-{partition}"

    def log_of(self, broker: int, partition: int) -> ReplicaLog | None:
        return next((g for g in self.logs if g.broker == broker and g.partition == partition), None)

    def summary(self) -> dict[str, Any]:
        """Counts for the report (the lists themselves are in `to_json`)."""
        by_outcome: dict[str, int] = {}
        errors: dict[str, int] = {}
        for p in self.produced:
            by_outcome[p.outcome] = by_outcome.get(p.outcome, 0) + 1
            if p.error:
                errors[p.error] = errors.get(p.error, 0) + 1
        return {
            "sent": len(self.produced),
            "acked": by_outcome.get("acked", 0),
            "failed": by_outcome.get("failed", 0),
            "pending": by_outcome.get("pending", 0),
            "errors": errors,
            "fetches": len(self.reads),
            "records_fetched": sum(r.count for r in self.reads),
            "hw_samples": len(self.hw_samples),
            "zk_state_versions": len(self.states),
            "zk_gaps": len(self.zk_gaps),
            "validated_records": sum(len(v) for v in self.final.read.values()),
        }

    def to_json(self) -> dict[str, Any]:
        return asdict(self)
