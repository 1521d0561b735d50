"""The leaders' view a delay report ends with: a stuck LSO shown with the transaction holding
it, a partition with none open, a leader that did not answer."""

from __future__ import annotations

from minibroker.txn_delay.leaders import LeaderView


def test_an_open_transaction_is_named_at_the_stuck_lso() -> None:
    view = LeaderView("t", 0, 2, 9, 2, ((0, 2, 9_240),))
    assert view.text() == (
        "t-0: leader broker-2, high watermark 9, last stable offset 2; "
        "producer 0 open from offset 2 (quiet 9.2 s)"
    )


def test_no_open_transaction_and_no_answer() -> None:
    assert LeaderView("t", 1, 3, 6, 6).text() == (
        "t-1: leader broker-3, high watermark 6, last stable offset 6; no open transaction"
    )
    assert LeaderView("t", 1, 3).text() == "t-1: leader broker-3: did not answer"
    unknown = LeaderView("t", 0, 1, 5, 3, ((7, 3, -1),)).text()
    assert unknown.endswith("producer 7 open from offset 3")
