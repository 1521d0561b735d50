"""Kafka's leader-epoch cache semantics (reference §4.2)."""

from __future__ import annotations

import pytest

from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache


def cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(e, o) for e, o in pairs)


def pairs(c: LeaderEpochCache) -> list[tuple[int, int]]:
    return [(e.epoch, e.start_offset) for e in c.entries]


def test_assign_appends_a_new_epoch_and_reports_the_change() -> None:
    seen: list[tuple[EpochEntry, ...]] = []
    c = LeaderEpochCache(on_change=seen.append)
    assert c.assign(0, 0)
    assert c.assign(1, 5)
    assert pairs(c) == [(0, 0), (1, 5)]
    assert len(seen) == 2


def test_assign_of_the_latest_epoch_at_a_later_offset_is_a_no_op() -> None:
    c = cache((0, 0), (1, 5))
    assert not c.assign(1, 9)
    assert pairs(c) == [(0, 0), (1, 5)]


def test_assign_drops_entries_not_below_the_new_one_in_epoch_and_offset() -> None:
    c = cache((0, 0), (1, 5), (2, 8))
    assert c.assign(3, 6)  # e.g. after a truncation the log continues at 6 in epoch 3
    assert pairs(c) == [(0, 0), (1, 5), (3, 6)]
    c2 = cache((0, 0), (2, 5))
    c2.assign(1, 7)  # an older epoch at a later offset replaces the newer entry
    assert pairs(c2) == [(0, 0), (1, 7)]


def test_a_negative_epoch_is_never_assigned() -> None:
    c = cache()
    assert not c.assign(-1, 0)
    assert c.entries == ()


def test_truncate_from_end_removes_epochs_starting_at_or_after_the_offset() -> None:
    c = cache((0, 0), (1, 5), (2, 8))
    c.truncate_from_end(8)
    assert pairs(c) == [(0, 0), (1, 5)]
    c.truncate_from_end(3)
    assert pairs(c) == [(0, 0)]


def test_truncate_from_start_moves_the_last_earlier_epoch_to_the_new_start() -> None:
    c = cache((0, 0), (1, 5), (2, 8))
    c.truncate_from_start(6)
    assert pairs(c) == [(1, 6), (2, 8)]


@pytest.mark.parametrize(
    ("requested", "expected"),
    [
        (-1, (-1, -1)),  # undefined
        (4, (4, 20)),  # the latest epoch: its end is the LEO
        (2, (2, 12)),  # a known epoch: it ends where the next one starts
        (3, (2, 12)),  # unknown, between 2 and 4: the largest epoch below and the next start
        (1, (1, 8)),
        (0, (0, 5)),  # below every entry: the requested epoch and the first start
        (9, (-1, -1)),  # above every entry and not the latest
    ],
)
def test_end_offset_for_answers_like_kip_279(requested: int, expected: tuple[int, int]) -> None:
    c = cache((1, 5), (2, 8), (4, 12))
    assert c.end_offset_for(requested, log_end_offset=20) == expected


def test_an_empty_cache_knows_no_epoch() -> None:
    assert cache().end_offset_for(3, 10) == (-1, -1)


def test_entries_must_increase() -> None:
    with pytest.raises(ValueError, match="must increase"):
        cache((1, 5), (1, 6))
