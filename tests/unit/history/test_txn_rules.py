"""The transactional rules (minibroker.history.txn_rules) on hand-made histories: torn
transactions, a read_committed consumer stalled behind a hanging transaction, and dependency
cycles between committed transactions with their classes; each found where it is and nowhere
else, and through check() in the report."""

from __future__ import annotations

from minibroker.history import ClientHistory, Commit, Idle, Read, Send, Txn, check
from minibroker.history.model import Op
from minibroker.history.txn_rules import (
    cycles,
    dependency_edges,
    stalled_consumers,
    torn_transactions,
)

S = 1000  # ms


def w(value: str, offset: int, txn: str = "", *, p: int = 0, ms: int = 0, topic: str = "t") -> Send:
    """An acknowledged write of `value` at `offset`, in transaction `txn` (its producer is the
    transaction's: `prod-a#1` is prod-a's)."""
    client = txn.split("#")[0] if txn else "prod"
    return Send(
        f"{client}:{value}", client, topic, None, value.encode(), ms, "ok", p, offset, ms + 1,
        txn=txn,
    )  # fmt: skip


def r(value: str, offset: int, *, p: int = 0, ms: int = 10, client: str = "c") -> Read:
    return Read(client, "g", "t", p, offset, None, value.encode(), ms, read_committed=True)


def end(txn: str, outcome: str = "committed", ms: int = 5) -> Txn:
    return Txn(txn.split("#")[0], txn, 0, ms, outcome)


def history(*ops: Op) -> ClientHistory:
    return ClientHistory.of(ops)


def test_a_committed_transaction_partly_visible_is_torn() -> None:
    ops: list[Op] = [w("a", 0, "x#1"), w("b", 0, "x#1", p=1), end("x#1"), r("a", 0), r("z", 3, p=1)]
    [torn] = torn_transactions(history(*ops, w("z", 3, p=1)))
    assert torn.kind == "torn-transaction" and torn.evidence["txn"] == "x#1"
    assert "t-0@0 read, t-1@0 never read though read past" in torn.message
    # All of it read, or partition 1 not read that far yet: not torn.
    assert torn_transactions(history(*ops, w("z", 3, p=1), r("b", 0, p=1))) == []
    assert torn_transactions(history(*ops[:4])) == []
    # An aborted transaction partly read is an aborted read (rules), not a torn one.
    aborted: list[Op] = [w("a", 0, "x#1"), w("b", 0, "x#1", p=1), end("x#1", "aborted"), r("a", 0)]
    assert torn_transactions(history(*aborted, r("z", 3, p=1))) == []


def hanging() -> list[Op]:
    """x#1 commits at 5 s; the consumer read up to offset 1 and, behind a record at offset 2
    nobody committed (a delayed produce of y#1, acknowledged after y#1 ended), never got x#1's
    record at offset 3, though it polled (Idle) 70 s more."""
    return [
        w("a", 0, ms=1 * S),
        w("b", 1, ms=1 * S),
        Send("y:late", "y", "t", None, b"late", 2 * S, "ok", 0, 2, 9 * S, txn="y#1"),
        Txn("y", "y#1", 2 * S, 3 * S, "committed"),
        w("c", 3, "x#1", ms=4 * S),
        Txn("x", "x#1", 4 * S, 5 * S, "committed"),
        r("a", 0, ms=6 * S),
        r("b", 1, ms=6 * S),
        *(Idle("c", "g", t * S, read_committed=True) for t in range(7, 76)),
    ]


def test_a_read_committed_consumer_stalled_past_the_transaction_timeout_is_found() -> None:
    [stall] = stalled_consumers(history(*hanging()), transaction_timeout_ms=60 * S)
    assert stall.kind == "stalled-consumer" and stall.evidence["last_read"] == 1
    assert stall.evidence["first_unread"].offset == 3
    assert "t-0: c (read_committed) polled until 70 s after t-0@3 'c' committed" in stall.message
    assert "last stable offset stayed at or below 2" in stall.message
    assert "@2 'late' of y#1 (committed, acknowledged after its transaction ended)" in stall.message
    # Within the timeout a transaction may still be open: no anomaly yet.
    assert stalled_consumers(history(*hanging()), transaction_timeout_ms=80 * S) == []
    # A consumer that stopped polling is not stalled; nor one that got the record.
    stopped = [o for o in hanging() if not isinstance(o, Idle)]
    assert stalled_consumers(history(*stopped), transaction_timeout_ms=60 * S) == []
    assert stalled_consumers(history(*hanging(), r("c", 3, ms=76 * S)), 60 * S) == []


def test_a_read_uncommitted_consumer_is_never_stalled_by_a_transaction() -> None:
    ops: list[Op] = [o for o in hanging() if not isinstance(o, (Read, Idle))]
    ops += [Read("c", "g", "t", 0, 1, None, b"b", 6 * S), Idle("c", "g", 75 * S)]
    assert stalled_consumers(history(*ops), transaction_timeout_ms=60 * S) == []


def test_write_order_gives_ww_edges_and_committed_positions_wr_and_rw() -> None:
    # A and B interleave in partitions 0 and 1; C consumed partition 2 up to B's record (next
    # offset 1) in its transaction, before A's record at offset 1 there.
    ops: list[Op] = [
        w("a0", 0, "a#1"), w("b0", 1, "b#1"), w("b1", 0, "b#1", p=1), w("a1", 1, "a#1", p=1),
        w("b2", 0, "b#1", p=2), w("a2", 1, "a#1", p=2),
        end("a#1"), end("b#1"),
        Commit("c", "g", (("t", 2, 1),), 6, txn="c#1"), end("c#1", ms=7),
    ]  # fmt: skip
    assert dependency_edges(history(*ops)) == [
        ("a#1", "b#1", "ww"),
        ("b#1", "a#1", "ww"),
        ("b#1", "c#1", "wr"),
        ("c#1", "a#1", "rw"),
    ]


def crossed(offset: int) -> list[Op]:
    """a#1 writes t-0 and b#1 writes t-1, each at `offset`; each commits, in its transaction,
    a position of 1 in the other's partition (consume-transform-produce)."""
    return [
        w("a0", offset, "a#1"), w("b0", offset, "b#1", p=1),
        Commit("a", "g", (("t", 1, 1),), 3, txn="a#1"),
        Commit("b", "g", (("t", 0, 1),), 3, txn="b#1"),
        end("a#1"), end("b#1"),
    ]  # fmt: skip


def test_cycles_are_classified_and_only_a_wr_cycle_is_a_failure() -> None:
    interleaved: list[Op] = [w("a0", 0, "a#1"), w("b0", 1, "b#1"), w("b1", 0, "b#1", p=1),
                   w("a1", 1, "a#1", p=1), end("a#1"), end("b#1")]  # fmt: skip
    [g0] = cycles(history(*interleaved))
    assert (g0.kind, g0.allowed) == ("cycle-G0", True)
    assert g0.message in (
        "G0 between 2 committed transactions: a#1 -ww-> b#1 -ww-> a#1",
        "G0 between 2 committed transactions: b#1 -ww-> a#1 -ww-> b#1",
    )
    # Each consumed the other's committed record: one of them read before the other committed,
    # so read something uncommitted.
    [g1] = cycles(history(*crossed(0)))
    assert (g1.kind, g1.allowed) == ("cycle-G1c-wr", False)
    # Write skew: each committed a position just below the other's write (two rw edges).
    skew = crossed(1)
    [g2] = cycles(history(*skew))
    assert (g2.kind, g2.allowed) == ("cycle-G2", True)
    # An aborted transaction takes no part; nor do transactions in one order everywhere.
    assert cycles(history(*interleaved[:-1], end("b#1", "aborted"))) == []
    in_order: list[Op] = [w("a0", 0, "a#1"), w("b0", 1, "b#1"), w("a1", 0, "a#1", p=1),
                w("b1", 1, "b#1", p=1), end("a#1"), end("b#1")]  # fmt: skip
    assert cycles(history(*in_order)) == []


def test_check_reports_the_transactional_anomalies() -> None:
    result = check(history(*hanging()), transaction_timeout_ms=60 * S)
    assert result.kinds() == {"stalled-consumer": 1} and not result.ok
    assert "stalled-consumer: 1 (FAILURE)" in result.text()
    allowed = check(
        history(w("a0", 0, "a#1"), w("b0", 1, "b#1"), w("b1", 0, "b#1", p=1),
                w("a1", 1, "a#1", p=1), end("a#1"), end("b#1"))
    )  # fmt: skip
    assert allowed.ok and allowed.kinds() == {"cycle-G0": 1}
