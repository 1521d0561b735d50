"""ISR change propagation: 5 s quiet, 60 s at most, checked every 2.5 s (reference §3.2)."""

from __future__ import annotations

from broker.replication.isr_propagation import IsrChangePropagation
from minibroker.core.types import TopicPartition

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


def checks(
    p: IsrChangePropagation, start: int, end: int, every: int = 2500
) -> list[tuple[int, frozenset[TopicPartition]]]:
    out = []
    for now in range(start, end + 1, every):
        got = p.maybe_propagate(now)
        if got:
            out.append((now, got))
    return out


def test_nothing_to_propagate_without_changes() -> None:
    p = IsrChangePropagation(start_ms=0)
    assert checks(p, 0, 100_000) == []


def test_an_isolated_change_goes_out_5_to_7_5_seconds_later() -> None:
    p = IsrChangePropagation(start_ms=0)
    p.record(T0, now_ms=11_000)
    # Checks at 12.5 and 15 s: not quiet for more than 5 s yet; 17.5 s: out.
    assert checks(p, 12_500, 20_000) == [(17_500, frozenset({T0}))]


def test_changes_are_batched_into_one_notification() -> None:
    p = IsrChangePropagation(start_ms=0)
    p.record(T0, 10_000)
    p.record(T1, 11_000)
    assert checks(p, 12_500, 20_000) == [(17_500, frozenset({T0, T1}))]


def test_a_first_change_more_than_60_seconds_after_start_goes_out_at_the_next_check() -> None:
    # The 60 s maximum counts from the last propagation, which starts at broker start: a
    # change on a long-quiet broker is overdue at once (Kafka's ReplicaManager does the same).
    p = IsrChangePropagation(start_ms=0)
    p.record(T0, now_ms=61_000)
    assert checks(p, 62_500, 70_000) == [(62_500, frozenset({T0}))]


def test_continuous_churn_propagates_at_most_every_60_seconds() -> None:
    p = IsrChangePropagation(start_ms=0)
    sent = []
    for now in range(0, 200_001, 2500):
        p.record(T0, now)  # a change before every check: never quiet
        if p.maybe_propagate(now):
            sent.append(now)
    assert sent == [62_500, 125_000, 187_500]


def test_both_clocks_start_at_broker_start() -> None:
    p = IsrChangePropagation(start_ms=1_000)
    p.record(T0, 1_000)
    assert not p.maybe_propagate(6_000)  # 1000 + 5000 is not < 6000
    assert p.maybe_propagate(6_001) == frozenset({T0})
