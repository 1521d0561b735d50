"""The checker's eight invariants, each a pure function of a recorded History that returns its
violations with the evidence. Nothing here knows how the history was recorded, so every rule is
tested with hand-made histories (tests/unit/scenarios).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from minibroker.history.rules import misplaced_acknowledged
from minibroker.scenarios.history import History, HwSample, PartitionStateChange, ReplicaBatch


@dataclass(frozen=True)
class Violation:
    """One broken rule. `expected` marks what the scenario documents as a consequence of its
    fault (acked records an unclean election discards): reported, but not a failure."""

    invariant: str
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    expected: bool = False


@dataclass(frozen=True)
class UncleanElection:
    """A leader chosen outside the ISR it replaced, and where its log ended then."""

    partition: int
    ts_ms: int
    leader: int
    leader_epoch: int
    start_offset: int


Invariant = Callable[[History], list[Violation]]


def _states_by_partition(h: History) -> dict[int, list[PartitionStateChange]]:
    out: dict[int, list[PartitionStateChange]] = {}
    for s in h.states:
        if s.zk_version >= 0:
            out.setdefault(s.partition, []).append(s)
    return out


def unclean_elections(h: History) -> list[UncleanElection]:
    """Leaders elected from outside the ISR of the state they replaced (ZooKeeper's history),
    with the start offset of their epoch from the final leader's epoch checkpoint."""
    out = []
    for partition, states in sorted(_states_by_partition(h).items()):
        final = h.log_of(h.final.leader.get(partition, -1), partition)
        epochs = final.epochs if final is not None else []
        for before, after in zip(states, states[1:], strict=False):
            if after.leader < 0 or after.leader in before.isr or after.leader == before.leader:
                continue
            starts = [start for epoch, start in epochs if epoch >= after.leader_epoch]
            out.append(
                UncleanElection(
                    partition, after.ts_ms, after.leader, after.leader_epoch, min(starts, default=0)
                )
            )
    return out


def acked_records_present(h: History) -> list[Violation]:
    """Every record acknowledged with acks=all is in the validating read at its offset."""
    out = []
    unclean = unclean_elections(h) if h.unclean_loss_expected else []
    where: dict[int, dict[str, list[int]]] = {}
    for partition, read in h.final.read.items():
        index = where.setdefault(partition, {})
        for offset, value in read.items():
            index.setdefault(value, []).append(offset)
    acked = {(p.partition, p.offset, p.value): p for p in h.produced if p.outcome == "acked"}
    for m in misplaced_acknowledged(acked, h.final.read):
        p, found = acked[(m.where, m.offset, m.value)], m.found
        in_logs = [
            g.broker for g in h.logs if g.partition == p.partition and p.value in g.values.values()
        ]
        evidence = {
            "partition": p.partition,
            "offset": p.offset,
            "value": p.value,
            "acked_ms": p.done_ms,
            "found": found,
            "final_hw": h.final.high_watermark.get(p.partition),
            "read_at_offsets": where.get(p.partition, {}).get(p.value, []),
            "in_logs_of": in_logs,
        }
        excuse = next(
            (
                u
                for u in unclean
                if u.partition == p.partition
                and p.done_ms <= u.ts_ms
                and p.offset >= u.start_offset
            ),
            None,
        )
        what = f"offset holds {found!r}" if found is not None else "offset not read"
        message = f"{h.tp_name(p.partition)} offset {p.offset}: acked {p.value!r} but {what}"
        if excuse is not None:
            message += (
                f" (expected: unclean election of broker {excuse.leader} at epoch "
                f"{excuse.leader_epoch}, whose log ended at {excuse.start_offset})"
            )
        out.append(Violation("acked-records-present", message, evidence, excuse is not None))
    return out


def _batch_text(b: ReplicaBatch | None) -> str:
    if b is None:
        return "nothing"
    return f"offsets {b.base_offset}..{b.last_offset} epoch {b.leader_epoch} crc {b.crc:08x}"


def replicas_agree_below_hw(h: History) -> list[Violation]:
    """Every replica's log equals the final leader's, batch by batch, below the leader's HW (an
    ISR member) or below the HW the replica itself last knew (a replica outside the ISR)."""
    out = []
    for partition, replicas in sorted(h.assignment.items()):
        leader = h.final.leader.get(partition, -1)
        hw = h.final.high_watermark.get(partition)
        if leader < 0 or hw is None:
            continue
        tp = h.tp_name(partition)
        ref = h.log_of(leader, partition)
        if ref is None or ref.error:
            why = ref.error if ref is not None else "no files"
            out.append(
                Violation(
                    "replicas-agree-below-hw",
                    f"{tp}: the leader's (broker {leader}) log cannot be read: {why}",
                    {"partition": partition, "leader": leader},
                )
            )
            continue
        if ref.log_end_offset < hw:
            out.append(
                Violation(
                    "replicas-agree-below-hw",
                    f"{tp}: leader {leader}'s log ends at {ref.log_end_offset}, below its HW {hw}",
                    {"partition": partition, "leader": leader, "high_watermark": hw},
                )
            )
        isr = h.final.isr.get(partition, ())
        for broker in replicas:
            log = h.log_of(broker, partition)
            if broker == leader or log is None:
                continue
            bound = hw if broker in isr else min(hw, log.high_watermark or 0)
            mine = [b for b in log.batches if b.base_offset < bound]
            theirs = [b for b in ref.batches if b.base_offset < bound]
            if mine == theirs:
                continue
            i = next(
                (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b),
                min(len(mine), len(theirs)),
            )
            a = mine[i] if i < len(mine) else None
            b = theirs[i] if i < len(theirs) else None
            out.append(
                Violation(
                    "replicas-agree-below-hw",
                    f"{tp}: broker {broker}'s log differs from leader {leader}'s below offset "
                    f"{bound}: batch {i} is {_batch_text(a)} on {broker}, {_batch_text(b)} on "
                    f"{leader}",
                    {
                        "partition": partition,
                        "broker": broker,
                        "leader": leader,
                        "bound": bound,
                        "in_isr": broker in isr,
                        "batch_index": i,
                        "replica_batch": a,
                        "leader_batch": b,
                    },
                )
            )
    return out


def leader_hw_never_decreases(h: History) -> list[Violation]:
    """A leader's HW only moves forward within one leader epoch (HW monitor samples)."""
    out = []
    best: dict[tuple[int, int, int], HwSample] = {}
    for s in h.hw_samples:
        if not s.is_leader:
            continue
        key = (s.partition, s.broker, s.leader_epoch)
        prev = best.get(key)
        if prev is not None and s.high_watermark < prev.high_watermark:
            out.append(
                Violation(
                    "leader-hw-never-decreases",
                    f"{h.tp_name(s.partition)}: leader {s.broker}'s HW went from "
                    f"{prev.high_watermark} down to {s.high_watermark} in epoch {s.leader_epoch}",
                    {"before": prev, "after": s},
                )
            )
        if prev is None or s.high_watermark >= prev.high_watermark:
            best[key] = s
    return out


def no_read_past_hw(h: History) -> list[Violation]:
    """No Fetch response gave the consumer a record at or beyond that response's HW."""
    return [
        Violation(
            "no-read-past-hw",
            f"{h.tp_name(r.partition)}: broker {r.broker} returned offsets "
            f"{r.first_offset}..{r.last_offset} with HW {r.high_watermark}",
            {"read": r},
        )
        for r in h.reads
        if r.count and r.last_offset >= r.high_watermark
    ]


def _leader_samples(h: History) -> Iterator[HwSample]:
    return (s for s in h.hw_samples if s.is_leader)


def leader_in_isr(h: History) -> list[Violation]:
    """The leader is a member of the ISR: in every ZooKeeper state (leader -1 excepted) and in
    every leader's own view."""
    out = [
        Violation(
            "leader-in-isr",
            f"{h.tp_name(s.partition)}: ZooKeeper state v{s.zk_version} has leader {s.leader} "
            f"outside ISR {list(s.isr)}",
            {"state": s},
        )
        for s in h.states
        if s.zk_version >= 0 and s.leader >= 0 and s.leader not in s.isr
    ]
    out += [
        Violation(
            "leader-in-isr",
            f"{h.tp_name(s.partition)}: leader {s.broker} reported ISR {list(s.isr)} without "
            f"itself (epoch {s.leader_epoch})",
            {"sample": s},
        )
        for s in _leader_samples(h)
        if s.broker not in s.isr
    ]
    return out


def leader_epochs_grow(h: History) -> list[Violation]:
    """Leader epochs never go back: in ZooKeeper's successive states (a new leader always
    comes with a higher epoch) and in each broker's successive views within one life."""
    out = []
    for partition, states in sorted(_states_by_partition(h).items()):
        for a, b in zip(states, states[1:], strict=False):
            if b.leader_epoch < a.leader_epoch or (
                b.leader_epoch == a.leader_epoch and b.leader != a.leader
            ):
                out.append(
                    Violation(
                        "leader-epochs-grow",
                        f"{h.tp_name(partition)}: ZooKeeper state went from leader {a.leader} "
                        f"epoch {a.leader_epoch} (v{a.zk_version}) to leader {b.leader} epoch "
                        f"{b.leader_epoch} (v{b.zk_version})",
                        {"before": a, "after": b},
                    )
                )
    last: dict[tuple[int, int, int], HwSample] = {}
    for s in h.hw_samples:
        key = (s.broker, s.life, s.partition)
        prev = last.get(key)
        if prev is not None and s.leader_epoch < prev.leader_epoch:
            out.append(
                Violation(
                    "leader-epochs-grow",
                    f"{h.tp_name(s.partition)}: broker {s.broker} went from epoch "
                    f"{prev.leader_epoch} back to {s.leader_epoch}",
                    {"before": prev, "after": s},
                )
            )
        last[key] = s
    return out


def at_most_one_leader_per_epoch(h: History) -> list[Violation]:
    """No two brokers lead a partition in the same epoch: not in ZooKeeper, not in the
    brokers' own views."""
    out = []
    seen: dict[tuple[str, int, int], set[int]] = {}

    def note(where: str, partition: int, epoch: int, leader: int, evidence: Any) -> None:
        leaders = seen.setdefault((where, partition, epoch), set())
        if leaders and leader not in leaders:
            out.append(
                Violation(
                    "one-leader-per-epoch",
                    f"{h.tp_name(partition)}: leaders {sorted(leaders)} and {leader} both in "
                    f"epoch {epoch} (seen in {where})",
                    {"partition": partition, "epoch": epoch, "evidence": evidence},
                )
            )
        leaders.add(leader)

    for s in h.states:
        if s.zk_version >= 0 and s.leader >= 0:
            note("ZooKeeper", s.partition, s.leader_epoch, s.leader, s)
    for sample in _leader_samples(h):
        note("the brokers", sample.partition, sample.leader_epoch, sample.broker, sample)
    return out


def isr_within_replicas(h: History) -> list[Violation]:
    """Every ISR, in ZooKeeper and in the leaders' views, is a subset of the assignment."""

    def outside(partition: int, isr: Iterable[int]) -> list[int]:
        return sorted(set(isr) - set(h.assignment.get(partition, ())))

    out = [
        Violation(
            "isr-within-replicas",
            f"{h.tp_name(s.partition)}: ZooKeeper ISR {list(s.isr)} has non-replicas "
            f"{outside(s.partition, s.isr)} (replicas {list(h.assignment.get(s.partition, ()))})",
            {"state": s},
        )
        for s in h.states
        if s.zk_version >= 0 and outside(s.partition, s.isr)
    ]
    out += [
        Violation(
            "isr-within-replicas",
            f"{h.tp_name(s.partition)}: leader {s.broker}'s ISR {list(s.isr)} has non-replicas "
            f"{outside(s.partition, s.isr)}",
            {"sample": s},
        )
        for s in _leader_samples(h)
        if outside(s.partition, s.isr)
    ]
    return out


INVARIANTS: dict[str, Invariant] = {
    "acked-records-present": acked_records_present,
    "replicas-agree-below-hw": replicas_agree_below_hw,
    "leader-hw-never-decreases": leader_hw_never_decreases,
    "no-read-past-hw": no_read_past_hw,
    "leader-in-isr": leader_in_isr,
    "leader-epochs-grow": leader_epochs_grow,
    "one-leader-per-epoch": at_most_one_leader_per_epoch,
    "isr-within-replicas": isr_within_replicas,
}


def check_all(h: History) -> list[Violation]:
    """Every invariant's violations, in INVARIANTS order."""
    return [v for check in INVARIANTS.values() for v in check(h)]
