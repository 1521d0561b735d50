"""The history checker's rules on hand-made histories: each anomaly found where it is and
nowhere else, and the report naming it with the cluster's events around it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from minibroker.history import (
    Assign,
    ClientHistory,
    Commit,
    HistoryRecorder,
    Read,
    Send,
    Txn,
    check,
    load,
)
from minibroker.history.model import Op, from_line, to_line


def sent(
    value: str,
    offset: int,
    *,
    p: int = 0,
    topic: str = "t",
    txn: str = "",
    key: str = "",
    ms: int = 0,
    outcome: str = "ok",
) -> Send:  # noqa: E501
    return Send(
        f"prod:{value}", "prod", topic, key.encode() or None, value.encode(), ms, outcome, p,
        offset if outcome == "ok" else -1, ms + 1, txn=txn,
    )  # fmt: skip


def read(
    value: str,
    offset: int,
    *,
    p: int = 0,
    topic: str = "t",
    client: str = "cons",
    group: str = "g",
    ms: int = 10,
    committed: bool = False,
    key: str = "",
) -> Read:  # noqa: E501
    return Read(
        client, group, topic, p, offset, key.encode() or None, value.encode(), ms, committed
    )


def kinds(*ops: Op, **kw: Any) -> dict[str, int]:
    return check(ClientHistory.of(ops), **kw).kinds()


def test_a_clean_history_has_no_anomaly() -> None:
    result = check(ClientHistory.of([sent("a", 0), sent("b", 1), read("a", 0), read("b", 1)]))
    assert result.ok and result.anomalies == ()
    assert "no anomaly found" in result.text()


def test_an_acknowledged_record_never_read_below_a_read_offset_is_lost() -> None:
    h: list[Op] = [sent("a", 0), sent("b", 1), sent("c", 2), read("a", 0), read("c", 2)]
    result = check(ClientHistory.of(h))
    assert result.kinds() == {"lost-write": 1}
    assert "t-0 offset 1: 'b' acknowledged to prod but never read" in result.text()
    # Not read that far: not lost (the consumer stopped before it).
    assert kinds(sent("a", 0), sent("b", 1), read("a", 0)) == {}
    # A failed or indefinite send is not owed to anyone.
    assert kinds(sent("a", 0, outcome="info"), sent("b", 1), read("b", 1)) == {}


def test_two_records_at_one_offset_are_inconsistent_offsets() -> None:
    assert kinds(sent("a", 0), read("a", 0), read("x", 0, client="c2")) == {
        "inconsistent-offsets": 1,
        "unexpected-read": 1,
    }
    # Acknowledged at 1, read at 0 and nothing at 1: inconsistent, not lost.
    found = kinds(sent("a", 1), sent("b", 0), read("a", 0), read("b", 1))
    assert found == {"inconsistent-offsets": 2}


def test_offsets_going_back_within_a_consumer_without_a_rebalance() -> None:
    assert kinds(sent("a", 0), sent("b", 1), read("a", 0), read("b", 1), read("a", 0, ms=20)) == {
        "nonmonotonic-poll": 1
    }
    rebalanced = Assign("cons", "g", (("t", 0),), 15)
    assert kinds(sent("a", 0), read("a", 0), read("a", 0, ms=12), rebalanced) == {
        "nonmonotonic-poll": 1
    }
    assert kinds(sent("a", 0), read("a", 0), rebalanced, read("a", 0, ms=20)) == {}


def test_reading_again_below_the_groups_commit_is_beyond_at_least_once() -> None:
    commit = Commit("cons", "g", (("t", 0, 2),), 15)
    again = read("a", 0, client="cons2", ms=20)
    assert kinds(sent("a", 0), sent("b", 1), read("a", 0), read("b", 1), commit, again) == {
        "reread-below-commit": 1
    }
    # Above the commit, a restarted consumer's re-read is at-least-once's due.
    low = Commit("cons", "g", (("t", 0, 1),), 15)
    assert (
        kinds(
            sent("a", 0),
            sent("b", 1),
            read("a", 0),
            read("b", 1),
            low,
            read("b", 1, client="c2", ms=20),
        )
        == {}
    )
    # A consumer that owned the partition since before the commit (a zombie whose session
    # expired) returning records it had fetched: at-least-once's due.
    zombie = read("a", 0, ms=20)
    by_other = Commit("cons2", "g", (("t", 0, 2),), 15)
    assert kinds(sent("a", 0), sent("b", 1), read("a", 0), read("b", 1), by_other, zombie) == {
        "nonmonotonic-poll": 1
    }
    # Another group has its own progress.
    other = read("a", 0, client="c3", group="h", ms=20)
    assert kinds(sent("a", 0), read("a", 0), commit, other) == {}


def test_one_record_at_two_offsets_is_a_duplicate_allowed_only_by_at_least_once() -> None:
    ops: list[Op] = [sent("a", 0), sent("a", 1), read("a", 0), read("a", 1)]
    lenient = check(ClientHistory.of(ops))
    assert lenient.kinds() == {"duplicate": 1} and lenient.ok
    assert "duplicate: 1 (allowed by at-least-once)" in lenient.text()
    strict = check(ClientHistory.of(ops), delivery="exactly-once")
    assert not strict.ok and "'a' is in t 2 times: t-0@0, t-0@1" in strict.text()


def test_a_read_committed_consumer_reading_an_aborted_transaction() -> None:
    ops: list[Op] = [
        sent("a", 0, txn="prod#1"),
        Txn("prod", "prod#1", 0, 5, "aborted"),
        sent("b", 2, txn="prod#2"),
        Txn("prod", "prod#2", 6, 8, "committed"),
    ]
    assert kinds(*ops, read("b", 2, committed=True)) == {}
    assert kinds(*ops, read("a", 0, committed=True), read("b", 2, committed=True)) == {
        "aborted-read": 1
    }
    # read_uncommitted sees aborted records, as Kafka lets it.
    assert kinds(*ops, read("a", 0), read("b", 2)) == {}
    # The aborted record written again by the next transaction (a reprocessed input): its
    # read at the committed offset is no aborted read; one at the aborted offset is.
    again: list[Op] = [*ops, sent("a", 3, txn="prod#2")]
    again[0] = Send("prod:a0", "prod", "t", None, b"a", 0, "ok", 0, 0, 1, txn="prod#1")
    b = read("b", 2, committed=True)
    assert kinds(*again, b, read("a", 3, committed=True)) == {}
    assert kinds(*again, read("a", 0, committed=True), b) == {"aborted-read": 1}
    # Without an offset (its ack never came), the record itself is what is known.
    unacked = Send("prod:x", "prod", "t", None, b"x", 0, "info", txn="prod#1")
    assert kinds(*ops, unacked, b, read("x", 4, committed=True)) == {"aborted-read": 1}


def test_a_committed_transactions_record_not_readable_is_lost_an_aborted_one_is_not() -> None:
    ops: list[Op] = [
        sent("a", 0, txn="prod#1"),
        sent("b", 1, txn="prod#1"),
        Txn("prod", "prod#1", 0, 5, "committed"),
        sent("c", 3, txn="prod#2"),
        Txn("prod", "prod#2", 6, 8, "aborted"),
        sent("d", 5),
    ]
    # b is lost; and so prod#1, of which a was read, is torn (txn_rules).
    assert kinds(*ops, read("a", 0, committed=True), read("d", 5, committed=True)) == {
        "lost-write": 1,
        "torn-transaction": 1,
    }


def test_pipelines_catch_commit_before_process_and_reprocessing() -> None:
    orders: list[Op] = [sent(f"o{i}", i, topic="orders", key=f"k{i}") for i in range(3)]
    reads: list[Op] = [
        read(f"o{i}", i, topic="orders", key=f"k{i}", client="app") for i in range(3)
    ]
    invoices: list[Op] = [
        sent("i0", 0, topic="invoices", key="k0"),
        sent("i2", 1, topic="invoices", key="k2"),
    ]
    committed = Commit("app", "g", (("orders", 0, 3),), 20)
    result = check(
        ClientHistory.of([*orders, *reads, *invoices, committed]), pipelines={"orders": "invoices"}
    )
    assert result.kinds() == {"unprocessed": 1}
    assert "orders-0 offset 1 (key 'k1'): group g committed past it (offset 3) but nothing" in (
        result.text()
    )
    again = sent("i0b", 2, topic="invoices", key="k0")
    done: list[Op] = [
        *orders,
        *reads,
        *invoices,
        sent("i1", 3, topic="invoices", key="k1"),
        again,
        committed,
    ]
    assert check(ClientHistory.of(done), pipelines={"orders": "invoices"}).kinds() == {
        "duplicate-output": 1
    }
    strict = check(
        ClientHistory.of(done), pipelines={"orders": "invoices"}, delivery="exactly-once"
    )
    assert not strict.ok


def test_a_transactions_offsets_count_only_when_it_commits() -> None:
    ops: list[Op] = [
        sent("a", 0), sent("b", 1), read("a", 0), read("b", 1),
        Commit("prod", "g", (("t", 0, 2),), 12, txn="prod#1"),
        Txn("prod", "prod#1", 11, 13, "aborted"),
        read("a", 0, client="c2", ms=20),
    ]  # fmt: skip
    assert kinds(*ops) == {}
    ops[5] = Txn("prod", "prod#1", 11, 13, "committed")
    assert kinds(*ops) == {"reread-below-commit": 1}


@dataclass
class FakeEvent:
    ts_ms: int
    text: str
    is_story: bool = True

    def __str__(self) -> str:
        return self.text


def test_the_report_quotes_the_cluster_events_around_an_anomaly() -> None:
    events = [
        FakeEvent(0, "long before"),
        FakeEvent(9_000, "leader moved"),
        FakeEvent(9_500, "routine hw move", is_story=False),
        FakeEvent(60_000, "later"),
    ]
    h: list[Op] = [sent("a", 0, ms=10_000), sent("b", 1, ms=10_000), read("b", 1, ms=11_000)]
    text = check(ClientHistory.of(h), timeline=events).text()
    assert "the cluster then:\n    leader moved" in text
    assert "long before" not in text and "later" not in text and "routine" not in text


def test_delivery_must_be_one_of_two() -> None:
    with pytest.raises(ValueError, match="at-least-once"):
        check(ClientHistory.of([]), delivery="at-most-once")


def test_ops_round_trip_as_json_lines_and_a_torn_line_is_skipped(tmp_path: Path) -> None:
    ops: list[Op] = [
        sent("a", 0, txn="p#1"), read("a", 0), Commit("c", "g", (("t", 0, 1),), 3),
        Txn("p", "p#1", 1, 2, "committed"), Assign("c", "g", (("t", 0),), 4),
    ]  # fmt: skip
    assert [from_line(to_line(o)) for o in ops] == ops
    path = tmp_path / "h.jsonl"
    with HistoryRecorder(path, name="x") as recorder:
        for o in ops:
            recorder.record(o)
    with path.open("a") as f:
        f.write('{"op": "send", "id"')  # killed mid-write
    assert load([path]).ops == ClientHistory.of(ops).ops


def test_a_completion_rewrites_its_send() -> None:
    invoked = Send("p:0", "p", "t", None, b"a", 1)
    done = Send("p:0", "p", "t", None, b"a", 1, "ok", 0, 7, 3)
    assert ClientHistory.of([invoked, done]).sends == [done]
    assert ClientHistory.of([invoked]).summary()["indefinite"] == 1
