"""The history checker's rules, after Jepsen's Kafka "queue" workload: each a pure function of
a ClientHistory that returns its anomalies with the evidence. They need nothing from the
brokers, so an application's history is checked on what its own clients saw.

A record is known by its (key, value): an application that sends one value twice sends two
records the checker cannot tell apart, and reads of either count for both.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from minibroker.history.model import (
    ABORTED,
    COMMITTED,
    OK,
    Assign,
    ClientHistory,
    Read,
    Send,
    show,
)

K = TypeVar("K")
V = TypeVar("V")


@dataclass(frozen=True)
class Anomaly:
    """One broken rule at `ts_ms`. `allowed` marks what the delivery guarantee permits
    (duplicates under at-least-once): reported, not a failure."""

    kind: str
    message: str
    ts_ms: int
    evidence: dict[str, Any] = field(default_factory=dict)
    allowed: bool = False


@dataclass(frozen=True)
class Misplaced(Generic[K, V]):
    """An acknowledged write whose offset, as read, holds something else (`found`, or None
    where nothing was read there)."""

    where: K
    offset: int
    value: V
    found: V | None


def misplaced_acknowledged(
    acknowledged: Iterable[tuple[K, int, V]], read: Mapping[K, Mapping[int, V]]
) -> Iterator[Misplaced[K, V]]:
    """The one rule "an acknowledged write is read back at the offset it was acknowledged at",
    shared by this checker and the scenarios' acked-records-present invariant."""
    for where, offset, value in acknowledged:
        found = read.get(where, {}).get(offset)
        if found != value:
            yield Misplaced(where, offset, value, found)


Record = tuple[bytes | None, bytes | None]  # (key, value)
TP = tuple[str, int]


def _record(o: Send | Read) -> Record:
    return (o.key, o.value)


def _tp(o: Send | Read) -> str:
    return f"{o.topic}-{o.partition}"


def aborted_transactions(h: ClientHistory) -> set[str]:
    """Transactions that certainly did not commit: aborted ones, and a transactional send
    that failed aborts its transaction as far as its records go."""
    return {t.txn for t in h.transactions.values() if t.outcome == ABORTED}


def acknowledged(h: ClientHistory) -> list[Send]:
    """Sends acknowledged with an offset whose records must be readable: not in a
    transaction that aborted or whose end is unknown."""
    ended = h.transactions
    return [
        s
        for s in h.sends
        if s.outcome == OK
        and s.offset >= 0
        and (not s.txn or (s.txn in ended and ended[s.txn].outcome == COMMITTED))
    ]


def lost_writes(h: ClientHistory) -> list[Anomaly]:
    """An acknowledged record never read, though its partition was read past its offset.
    One read at another offset is an inconsistent offset instead (below)."""
    read_at: dict[TP, dict[int, Record]] = defaultdict(dict)
    everywhere: dict[str, set[Record]] = defaultdict(set)
    for r in h.reads:
        read_at[(r.topic, r.partition)][r.offset] = _record(r)
        everywhere[r.topic].add(_record(r))
    highest = {tp: max(offsets) for tp, offsets in read_at.items()}
    writes = {(s.topic, s.partition, s.offset, _record(s)): s for s in acknowledged(h)}
    out = []
    for m in misplaced_acknowledged(((s[:2], s[2], s[3]) for s in writes), read_at):
        s = writes[(*m.where, m.offset, m.value)]
        if m.offset > highest.get(m.where, -1) or m.value in everywhere[s.topic]:
            continue
        out.append(
            Anomaly(
                "lost-write",
                f"{_tp(s)} offset {s.offset}: {show(s.value)} acknowledged to {s.client} but never "
                f"read, though the partition was read up to offset {highest[m.where]}"
                + (f" (offset {s.offset} read as {show(m.found[1])})" if m.found else ""),
                s.complete_ms,
                {"send": s},
            )
        )
    return out


def inconsistent_offsets(h: ClientHistory) -> list[Anomaly]:
    """Two different records at one offset, among acknowledgements and reads."""
    seen: dict[tuple[str, int, int], dict[Record, Send | Read]] = defaultdict(dict)
    for s in acknowledged(h):
        seen[(s.topic, s.partition, s.offset)].setdefault(_record(s), s)
    for r in h.reads:
        seen[(r.topic, r.partition, r.offset)].setdefault(_record(r), r)
    out = []
    for (topic, partition, offset), records in sorted(seen.items()):
        if len(records) < 2:
            continue
        sources = list(records.values())
        text = "; ".join(
            f"{show(o.value)} ({'acknowledged to' if isinstance(o, Send) else 'read by'} "
            f"{o.client})"
            for o in sources
        )
        ts = max(o.complete_ms if isinstance(o, Send) else o.ts_ms for o in sources)
        out.append(
            Anomaly(
                "inconsistent-offsets",
                f"{topic}-{partition} offset {offset} holds {len(records)} records: {text}",
                ts,
                {"offset": offset, "ops": sources},
            )
        )
    return out


def nonmonotonic_polls(h: ClientHistory) -> list[Anomaly]:
    """A consumer's reads of one partition go to a lower or equal offset without its
    assignment changing in between (Jepsen's nonmonotonic-poll)."""
    last: dict[tuple[str, str, int], Read] = {}
    out = []
    for o in h.ops:
        if o.op == "assign":
            for key in [k for k in last if k[0] == o.client]:
                del last[key]
        if not isinstance(o, Read):
            continue
        key = (o.client, o.topic, o.partition)
        prev = last.get(key)
        if prev is not None and o.offset <= prev.offset:
            out.append(
                Anomaly(
                    "nonmonotonic-poll",
                    f"{_tp(o)}: {o.client} read offset {prev.offset} then offset {o.offset}, "
                    "with no rebalance or seek in between",
                    o.ts_ms,
                    {"before": prev, "after": o},
                )
            )
        last[key] = o
    return out


def committed_progress(h: ClientHistory) -> Iterator[tuple[int, str, str, int, int]]:
    """(when, group, topic, partition, next offset) of every commit that took effect: a
    consumer's acknowledged commit, or a transaction's offsets when it committed."""
    ended = h.transactions
    for c in h.commits:
        if c.txn:
            t = ended.get(c.txn)
            if t is None or t.outcome != COMMITTED:
                continue
            when = t.end_ms
        elif c.outcome == OK:
            when = c.ts_ms
        else:
            continue
        for topic, partition, offset in c.offsets:
            yield when, c.group, topic, partition, offset


def rereads_below_commit(h: ClientHistory) -> list[Anomaly]:
    """A group reads a record again below the offset it had already committed past, by a
    consumer that started on the partition after that commit (a restarted consumer resumes at
    its group's committed offset): more than at-least-once allows. A consumer that owned the
    partition since before the commit may still return records it had fetched (a zombie whose
    session expired): that is at-least-once's due."""
    progress: dict[tuple[str, str, int], list[tuple[int, int]]] = defaultdict(list)
    for when, group, topic, partition, offset in committed_progress(h):
        progress[(group, topic, partition)].append((when, offset))
    started: dict[tuple[str, str, int], int] = {}  # (client, topic, partition) -> since when
    out = []
    for o in h.ops:
        if isinstance(o, Assign):
            for topic, partition in o.partitions:
                started[(o.client, topic, partition)] = o.ts_ms
        if not isinstance(o, Read) or not o.group:
            continue
        since = started.setdefault((o.client, o.topic, o.partition), o.ts_ms)
        passed = [
            (when, offset) for when, offset in progress.get((o.group, o.topic, o.partition), ())
            if when <= since and offset > o.offset
        ]  # fmt: skip
        if passed:
            when, offset = max(passed, key=lambda p: p[1])
            out.append(
                Anomaly(
                    "reread-below-commit",
                    f"{_tp(o)} offset {o.offset}: read by {o.client} of group {o.group}, which "
                    f"had committed offset {offset} before this consumer started on it",
                    o.ts_ms,
                    {"read": o, "committed": offset, "committed_ms": when},
                )
            )
    return out


def duplicates(h: ClientHistory, *, allowed: bool) -> list[Anomaly]:
    """One record read at two or more offsets of a topic: written twice (a retried send
    without idempotence, or a reprocessed input). At-least-once allows it."""
    offsets: dict[tuple[str, Record], dict[TP, set[int]]] = defaultdict(lambda: defaultdict(set))
    first: dict[tuple[str, Record], Read] = {}
    for r in h.reads:
        offsets[(r.topic, _record(r))][(r.topic, r.partition)].add(r.offset)
        first.setdefault((r.topic, _record(r)), r)
    out = []
    for (topic, record), where in offsets.items():
        places = sorted((tp[1], o) for tp, os in where.items() for o in os)
        if len(places) < 2:
            continue
        text = ", ".join(f"{topic}-{p}@{o}" for p, o in places)
        r = first[(topic, record)]
        out.append(
            Anomaly(
                "duplicate",
                f"{show(record[1])} is in {topic} {len(places)} times: {text}",
                r.ts_ms,
                {"topic": topic, "key": record[0], "value": record[1], "at": places},
                allowed,
            )
        )
    return out


def unexpected_reads(h: ClientHistory) -> list[Anomaly]:
    """A record read that no recorded producer sent, in a topic whose sends were recorded."""
    sent: dict[str, set[Record]] = defaultdict(set)
    for s in h.sends:
        sent[s.topic].add(_record(s))
    return [
        Anomaly(
            "unexpected-read",
            f"{_tp(r)} offset {r.offset}: {r.client} read {show(r.value)}, which no producer sent",
            r.ts_ms,
            {"read": r},
        )
        for r in h.reads
        if r.topic in sent and _record(r) not in sent[r.topic]
    ]


def aborted_reads(h: ClientHistory) -> list[Anomaly]:
    """A read_committed consumer read a record of a transaction that aborted: at an offset
    an aborted send was acknowledged at, or, for aborted sends without an offset, the same
    record where no committed send wrote it too (a reprocessed input writes the same record
    again, in the next transaction)."""
    aborted = aborted_transactions(h)
    at_offset: dict[tuple[str, int, int], str] = {}
    by_record: dict[tuple[str, Record], str] = {}
    for s in h.sends:
        if s.txn not in aborted:
            continue
        if s.offset >= 0:
            at_offset[(s.topic, s.partition, s.offset)] = s.txn
        else:
            by_record[(s.topic, _record(s))] = s.txn
    for s in h.sends:  # written again outside an aborted transaction: not known aborted
        if s.txn not in aborted:
            by_record.pop((s.topic, _record(s)), None)
    out = []
    for r in h.reads:
        txn = at_offset.get((r.topic, r.partition, r.offset)) or by_record.get(
            (r.topic, _record(r))
        )
        if r.read_committed and txn:
            out.append(
                Anomaly(
                    "aborted-read",
                    f"{_tp(r)} offset {r.offset}: {r.client} (read_committed) read "
                    f"{show(r.value)} of transaction {txn}, which aborted",
                    r.ts_ms,
                    {"read": r, "txn": txn},
                )
            )
    return out
