"""check(history): every rule of minibroker.history.rules over an application's history, the
consume-transform-produce rules where the application names its pipelines, and a report that
says which anomaly, where, when, and what the cluster was doing then (its event timeline).
The timeline is handed in (Cluster.events()), never read here; times are local, as the
timeline's.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from minibroker.client.event_text import clock
from minibroker.history import rules, txn_rules
from minibroker.history.model import ClientHistory, Send, show
from minibroker.history.rules import Anomaly

AT_LEAST_ONCE, EXACTLY_ONCE = "at-least-once", "exactly-once"
TIMELINE_WINDOW_MS = 5_000  # the cluster's events shown before and after an anomaly


class TimelineEvent(Protocol):
    """A cluster event (minibroker.testing.Event): when, whether it is part of the
    replication story (not a routine HW move), and its line."""

    @property
    def ts_ms(self) -> int: ...

    @property
    def is_story(self) -> bool: ...

    def __str__(self) -> str: ...


def _final_commits(h: ClientHistory, topic: str) -> dict[tuple[str, int], int]:
    """(group, partition) -> the highest offset the group's commits reached for `topic`."""
    out: dict[tuple[str, int], int] = {}
    for _, group, t, partition, offset in rules.committed_progress(h):
        if t == topic:
            out[(group, partition)] = max(out.get((group, partition), 0), offset)
    return out


def unprocessed(h: ClientHistory, source: str, sink: str) -> list[Anomaly]:
    """Consume-transform-produce, records known by key: an input record below its group's
    committed offset with no output of the same key, acknowledged or read (committed before
    it was processed, then lost: the commit-before-process bug)."""
    outputs = {s.key for s in rules.acknowledged(h) if s.topic == sink}
    outputs |= {r.key for r in h.reads if r.topic == sink}  # there, if its ack went unseen
    inputs: dict[tuple[int, int], Any] = {}
    for s in rules.acknowledged(h):
        if s.topic == source:
            inputs[(s.partition, s.offset)] = s
    for r in h.reads:
        if r.topic == source:
            inputs.setdefault((r.partition, r.offset), r)
    progress = sorted(rules.committed_progress(h))
    out = []
    for (group, partition), committed in sorted(_final_commits(h, source).items()):
        for (p, offset), o in sorted(inputs.items()):
            if p != partition or offset >= committed or o.key in outputs:
                continue
            passed_ms = next(
                when for when, g, t, q, next_offset in progress
                if (g, t, q) == (group, source, p) and next_offset > offset
            )  # fmt: skip
            out.append(
                Anomaly(
                    "unprocessed",
                    f"{source}-{p} offset {offset} (key {show(o.key)}): group {group} committed "
                    f"past it (offset {committed}) but nothing with its key reached {sink}",
                    passed_ms,
                    {"group": group, "partition": p, "offset": offset, "committed": committed},
                )
            )
    return out


def duplicate_outputs(h: ClientHistory, sink: str, *, allowed: bool) -> list[Anomaly]:
    """One input's key produced to the output more than once (reprocessing after a crash):
    at-least-once allows it, exactly-once does not."""
    by_key: dict[Any, list[Send]] = defaultdict(list)
    for s in rules.acknowledged(h):
        if s.topic == sink:
            by_key[s.key].append(s)
    return [
        Anomaly(
            "duplicate-output",
            f"key {show(key)} is in {sink} {len(sends)} times: "
            + ", ".join(f"{sink}-{s.partition}@{s.offset} by {s.client}" for s in sends),
            sends[1].complete_ms,
            {"key": key, "sends": sends},
            allowed,
        )
        for key, sends in by_key.items()
        if len(sends) > 1
    ]


@dataclass(frozen=True)
class CheckResult:
    """The anomalies found, the history's counts and the timeline the report quotes."""

    delivery: str
    anomalies: tuple[Anomaly, ...]
    counts: dict[str, int]
    timeline: tuple[Any, ...] = ()

    @property
    def ok(self) -> bool:
        """No anomaly the delivery guarantee forbids."""
        return not self.failures

    @property
    def failures(self) -> list[Anomaly]:
        return [a for a in self.anomalies if not a.allowed]

    def of_kind(self, kind: str) -> list[Anomaly]:
        return [a for a in self.anomalies if a.kind == kind]

    def kinds(self) -> dict[str, int]:
        out: dict[str, int] = defaultdict(int)
        for a in self.anomalies:
            out[a.kind] += 1
        return dict(out)

    def text(self, limit: int = 10) -> str:
        """The report: counts, then each kind's first anomalies and the cluster's replication
        events from 5 s before the first to 5 s after the last of them."""
        c = self.counts
        lines = [
            f"history ({self.delivery}): {c['sends']} sends ({c['acknowledged']} acknowledged, "
            f"{c['failed']} failed, {c['indefinite']} indefinite), {c['reads']} records read, "
            f"{c['commits']} commits, {c['transactions']} transactions",
        ]
        if not self.anomalies:
            return lines[0] + "\nno anomaly found"
        for kind, n in self.kinds().items():
            found = self.of_kind(kind)
            verdict = f"allowed by {self.delivery}" if found[0].allowed else "FAILURE"
            lines.append(f"{kind}: {n} ({verdict})")
            shown = found[:limit]
            lines += [f"  {clock(a.ts_ms)} {a.message}" for a in shown]
            if n > limit:
                lines.append(f"  … and {n - limit} more")
            around = _around(
                self.timeline, min(a.ts_ms for a in shown), max(a.ts_ms for a in shown)
            )
            if around:
                lines.append("  the cluster then:")
                lines += [f"    {e}" for e in around]
        return "\n".join(lines)


def _around(
    timeline: Sequence[TimelineEvent], first_ms: int, last_ms: int, most: int = 12
) -> list[str]:
    """The story events from TIMELINE_WINDOW_MS before `first_ms` to as long after `last_ms`,
    at most `most` of them, the nearest to the anomalies kept."""
    lo, hi = first_ms - TIMELINE_WINDOW_MS, last_ms + TIMELINE_WINDOW_MS
    near = [e for e in timeline if lo <= e.ts_ms <= hi and e.is_story]
    near.sort(key=lambda e: max(first_ms - e.ts_ms, e.ts_ms - last_ms, 0))
    return [str(e) for e in sorted(near[:most], key=lambda e: e.ts_ms)]


def check(
    history: ClientHistory,
    *,
    delivery: str = AT_LEAST_ONCE,
    pipelines: Mapping[str, str] | None = None,
    timeline: Sequence[TimelineEvent] = (),
    transaction_timeout_ms: int = txn_rules.KAFKA_TRANSACTION_TIMEOUT_MS,
) -> CheckResult:
    """Every rule over `history`. `delivery` is what the application promises
    (at-least-once: duplicates are reported, allowed; exactly-once: they fail). `pipelines`
    maps an input topic to the output topic it is transformed into, records known by key.
    `transaction_timeout_ms`: the producers' transaction.timeout.ms, the longest a transaction
    may hold read_committed consumers back (minibroker.history.txn_rules)."""
    if delivery not in (AT_LEAST_ONCE, EXACTLY_ONCE):
        raise ValueError(f"delivery must be {AT_LEAST_ONCE!r} or {EXACTLY_ONCE!r}")
    lenient = delivery == AT_LEAST_ONCE
    found = (
        rules.lost_writes(history)
        + rules.inconsistent_offsets(history)
        + rules.nonmonotonic_polls(history)
        + rules.rereads_below_commit(history)
        + rules.duplicates(history, allowed=lenient)
        + rules.unexpected_reads(history)
        + rules.aborted_reads(history)
        + txn_rules.torn_transactions(history)
        + txn_rules.stalled_consumers(history, transaction_timeout_ms)
        + txn_rules.cycles(history)
    )
    for source, sink in (pipelines or {}).items():
        found += unprocessed(history, source, sink)
        found += duplicate_outputs(history, sink, allowed=lenient)
    ordered = tuple(sorted(found, key=lambda a: (a.allowed, a.ts_ms)))
    return CheckResult(delivery, ordered, history.summary(), tuple(timeline))
