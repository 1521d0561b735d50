"""The checker's rules about transactions, after Jepsen's Kafka analysis (its queue workload with
transactions, and the Bufstream 0.1.0 report's delayed-message anomalies in Kafka's protocol):
pure functions of a ClientHistory, each returning its anomalies with the evidence. The rules
for single records (lost writes, aborted reads, duplicates, inconsistent offsets) are
minibroker.history.rules', and hold for transactional records too.

- **torn-transaction**: a committed transaction some of whose acknowledged records were read
  while others, in partitions read past their offsets, never were (all or nothing, broken).
- **stalled-consumer**: a read_committed consumer that kept polling a partition yet, for longer
  than `transaction.timeout.ms` after a record there committed, never got it: the partition's
  last stable offset stopped below it. Every transaction ends within that timeout (the
  coordinator aborts it), so a stop that long is a *hanging transaction*: one the coordinator
  does not know about (a delayed transactional produce written after its transaction ended).
  The report names the unread offsets between and who wrote them, as far as the history knows.
- **cycles** between committed transactions (Elle's dependency graph, Adya's classes): `ww`, T1
  wrote a partition at a lower offset than T2 (offset order); `wr`, T2 committed a consumer
  position past T1's write as the last one it read there (consume-transform-produce); `rw`,
  T1 committed a position just below T2's write. A cycle of `ww` edges alone is G0, with `wr`
  G1c, with one `rw` G-single, with more G2. Kafka orders appends, not transactions (an open
  transaction's records interleave with others' in every partition it writes), and promises
  read committed, not serializability: cycles with a `ww` or an `rw` edge are reported as
  allowed. A cycle of `wr` edges alone is not: each `wr` says its writer committed before
  its reader did, and a circle of "before" cannot be.
"""

from __future__ import annotations

import bisect
from collections import defaultdict

from minibroker.core.graph import components
from minibroker.history.model import COMMITTED, OK, Assign, ClientHistory, Idle, Read, Send, show
from minibroker.history.rules import Anomaly, Record, acknowledged

TP = tuple[str, int]
KAFKA_TRANSACTION_TIMEOUT_MS = 60_000  # the producer's transaction.timeout.ms default


def _record(o: Send | Read) -> Record:
    return (o.key, o.value)


def _where(s: Send) -> str:
    return f"{s.topic}-{s.partition}@{s.offset}"


def _reads_by_partition(h: ClientHistory) -> tuple[dict[TP, dict[int, Record]], set[Record]]:
    at: dict[TP, dict[int, Record]] = defaultdict(dict)
    everywhere: set[Record] = set()
    for r in h.reads:
        at[(r.topic, r.partition)][r.offset] = _record(r)
        everywhere.add(_record(r))
    return at, everywhere


def torn_transactions(h: ClientHistory) -> list[Anomaly]:
    """A committed transaction partly visible: some acknowledged records read, others never
    read though their partitions were read past them."""
    ended = h.transactions
    at, everywhere = _reads_by_partition(h)
    highest = {tp: max(offsets) for tp, offsets in at.items()}
    by_txn: dict[str, list[Send]] = defaultdict(list)
    for s in h.sends:
        if s.txn and s.outcome == OK and s.offset >= 0:
            by_txn[s.txn].append(s)
    out = []
    for txn, sends in sorted(by_txn.items()):
        end = ended.get(txn)
        if end is None or end.outcome != COMMITTED:
            continue
        seen = [s for s in sends if _record(s) in everywhere]
        unseen = [
            s for s in sends
            if _record(s) not in everywhere and s.offset <= highest.get((s.topic, s.partition), -1)
        ]  # fmt: skip
        if not seen or not unseen:
            continue
        out.append(
            Anomaly(
                "torn-transaction",
                f"transaction {txn} committed {len(sends)} records: "
                f"{', '.join(_where(s) for s in seen)} read, "
                f"{', '.join(_where(s) for s in unseen)} never read though read past",
                end.end_ms,
                {"txn": txn, "read": seen, "unread": unseen},
            )
        )
    return out


def _readable_since(h: ClientHistory) -> dict[TP, list[tuple[int, int, Send]]]:
    """Each partition's acknowledged records a read_committed consumer must get: (offset, since
    when it could, the send), by offset. A transaction's records once it committed; not one
    acknowledged after its transaction ended (a delayed produce: in what transaction it landed
    is what the stall's report is about)."""
    ended = h.transactions
    out: dict[TP, list[tuple[int, int, Send]]] = defaultdict(list)
    for s in acknowledged(h):
        since = ended[s.txn].end_ms if s.txn else s.complete_ms
        if s.txn and s.complete_ms > since:
            continue
        out[(s.topic, s.partition)].append((s.offset, since, s))
    for rows in out.values():
        rows.sort(key=lambda row: row[0])
    return out


def _consumers(h: ClientHistory) -> dict[str, tuple[int, set[TP], dict[TP, int]]]:
    """Each read_committed consumer: when it last polled, the partitions it was reading at the
    end (its last assignment, or those it read since), and its last offset read in each."""
    last_ms: dict[str, int] = {}
    owned: dict[str, set[TP]] = defaultdict(set)
    position: dict[str, dict[TP, int]] = defaultdict(dict)
    committed_readers = {r.client for r in h.reads if r.read_committed}
    committed_readers |= {o.client for o in h.ops if isinstance(o, Idle) and o.read_committed}
    for o in h.ops:
        if o.client not in committed_readers:
            continue
        if isinstance(o, Assign):
            owned[o.client] = set(o.partitions)
        elif isinstance(o, Read):
            tp = (o.topic, o.partition)
            owned[o.client].add(tp)
            position[o.client][tp] = max(position[o.client].get(tp, -1), o.offset)
            last_ms[o.client] = max(last_ms.get(o.client, 0), o.ts_ms)
        elif isinstance(o, Idle):
            last_ms[o.client] = max(last_ms.get(o.client, 0), o.ts_ms)
    return {c: (last_ms[c], owned[c], position[c]) for c in committed_readers if c in last_ms}


def _blockers(h: ClientHistory, tp: TP, after: int, before: int) -> str:
    """What the history knows of the offsets between a consumer's last read and the first
    committed record it never got: their writers, and their transactions' ends."""
    ended = h.transactions
    writes = {
        s.offset: s for s in h.sends if (s.topic, s.partition) == tp and after < s.offset < before
    }
    parts = []
    for offset in sorted(writes):
        s = writes[offset]
        if not s.txn:
            parts.append(f"@{offset} {show(s.value)} by {s.client}, no transaction")
            continue
        end = ended.get(s.txn)
        late = end is not None and s.complete_ms > end.end_ms
        how = "never ended" if end is None else end.outcome
        parts.append(
            f"@{offset} {show(s.value)} of {s.txn} ({how}"
            + (", acknowledged after its transaction ended" if late else "")
            + ")"
        )
    unknown = (before - after - 1) - len(writes)
    if unknown > 0:
        parts.append(f"{unknown} offset(s) no recorded producer wrote (markers, or unrecorded)")
    return "; ".join(parts) or "nothing between (the record itself is not delivered)"


def stalled_consumers(
    h: ClientHistory, transaction_timeout_ms: int = KAFKA_TRANSACTION_TIMEOUT_MS
) -> list[Anomaly]:
    """A read_committed consumer that kept polling a partition it was reading, yet never got a
    record there that committed more than `transaction_timeout_ms` before its last poll."""
    readable = _readable_since(h)
    out = []
    for client, (last_ms, owned, position) in sorted(_consumers(h).items()):
        for tp in sorted(owned):
            last = position.get(tp, -1)
            waiting = [
                (offset, since, s) for offset, since, s in readable.get(tp, ())
                if offset > last and last_ms - since > transaction_timeout_ms
            ]  # fmt: skip
            if not waiting:
                continue
            offset, since, s = waiting[0]
            out.append(
                Anomaly(
                    "stalled-consumer",
                    f"{tp[0]}-{tp[1]}: {client} (read_committed) polled until "
                    f"{(last_ms - since) / 1000:.0f} s after {_where(s)} {show(s.value)} "
                    f"committed and never got it ({len(waiting)} such records): its last stable "
                    f"offset stayed at or below {last + 1} (a hanging transaction); between: "
                    + _blockers(h, tp, last, offset),
                    since + transaction_timeout_ms,
                    {"client": client, "tp": tp, "last_read": last, "first_unread": s},
                )
            )
    return out


Edge = tuple[str, str, str]  # (from txn, to txn, "ww" | "wr" | "rw")


def dependency_edges(h: ClientHistory) -> list[Edge]:
    """The dependency graph between committed transactions (module docstring)."""
    ended = h.transactions
    committed = {txn for txn, t in ended.items() if t.outcome == COMMITTED}
    writes: dict[TP, list[tuple[int, str]]] = defaultdict(list)  # offset, txn ("" if none)
    for s in h.sends:
        if s.outcome == OK and s.offset >= 0 and (not s.txn or s.txn in committed):
            writes[(s.topic, s.partition)].append((s.offset, s.txn))
    for rows in writes.values():
        rows.sort()
    edges: set[Edge] = set()
    for rows in writes.values():
        txns = [txn for _, txn in rows if txn]
        edges |= {(a, b, "ww") for a, b in zip(txns, txns[1:], strict=False) if a != b}
    for c in h.commits:
        if c.txn not in committed:
            continue
        for topic, partition, next_offset in c.offsets:
            rows = writes.get((topic, partition), [])
            at = bisect.bisect_left(rows, (next_offset, ""))  # the first write at or above
            last_read = rows[at - 1][1] if at > 0 else ""
            next_write = rows[at][1] if at < len(rows) else ""
            if last_read and last_read != c.txn:
                edges.add((last_read, c.txn, "wr"))
            if next_write and next_write != c.txn:
                edges.add((c.txn, next_write, "rw"))
    return sorted(edges)


def _cycle_in(component: list[str], edges: list[Edge]) -> list[Edge]:
    """One cycle through the component's first node, by a breadth-first search."""
    inside = set(component)
    succ: dict[str, list[Edge]] = defaultdict(list)
    for e in edges:
        if e[0] in inside and e[1] in inside:
            succ[e[0]].append(e)
    start = component[0]
    came: dict[str, Edge] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for e in succ[node]:
                if e[1] == start:
                    path = [e]
                    while path[0][0] != start:
                        path.insert(0, came[path[0][0]])
                    return path
                if e[1] not in came:
                    came[e[1]] = e
                    following.append(e[1])
        frontier = following
    return []


# Each class and the edges its cycles may use, strictest first; a component is reported once,
# under the first class that finds a cycle in it.
CLASSES = (("G1c-wr", ("wr",)), ("G0", ("ww",)), ("G1c", ("ww", "wr")))


def cycles(h: ClientHistory) -> list[Anomaly]:
    """Dependency cycles between committed transactions, classified (module docstring)."""
    edges = dependency_edges(h)
    ends = h.transactions
    reported: set[frozenset[str]] = set()
    out = []
    for name, kinds in (*CLASSES, ("G-single/G2", ("ww", "wr", "rw"))):
        usable = [e for e in edges if e[2] in kinds]
        succ: dict[str, list[str]] = defaultdict(list)
        for a, b, _ in usable:
            succ[a].append(b)
        for component in components(succ):
            if any(frozenset(component) >= seen for seen in reported):
                continue
            reported.add(frozenset(component))
            cycle = _cycle_in(component, usable)
            rw = sum(e[2] == "rw" for e in cycle)
            kind = name if rw == 0 else ("G-single" if rw == 1 else "G2")
            path = "".join(f"{a} -{k}-> " for a, _, k in cycle) + cycle[0][0]
            out.append(
                Anomaly(
                    f"cycle-{kind}",
                    f"{kind} between {len(component)} committed transactions: {path}",
                    max(ends[t].end_ms for t in component),
                    {"transactions": component, "cycle": cycle},
                    allowed=kind != "G1c-wr",
                )
            )
    return out
