"""The test-only planted bugs (minibroker.core.planted_bugs): each one changes exactly the
decision it names, and PlantedBug.NONE is Kafka's rule. The simulation (tests/sim) shows each
one is caught; these tables show each one is really switched on."""

from __future__ import annotations

import pytest

from broker.replication.leader_epoch import LeaderEpochCache
from broker.replication.partition import Partition, PartitionState
from broker.replication.truncation import TruncationMode, epoch_to_ask, truncation_mode
from minibroker.core.planted_bugs import PlantedBug
from minibroker.runtime.settings import ConfigError, Settings
from tests.unit.broker.replication.test_partition_rules import LAG, TP, Offsets, fetch

NONE = PlantedBug.NONE
HW_ALL = PlantedBug.HW_FROM_ALL_REPLICAS
NO_FETCH = PlantedBug.SHRINK_ON_NO_FETCH
TO_HW = PlantedBug.TRUNCATE_TO_HW


def leader(bug: PlantedBug, leo: int, now: int = 0) -> tuple[Partition, Offsets]:
    log = Offsets(log_end_offset=leo)
    p = Partition(TP, 1, LAG, 2, planted_bug=bug)
    p.make_leader(PartitionState(1, 0, (1, 2, 3), (1, 2, 3), 4, 1), log, now)
    return p, log


# ---- hw-from-all-replicas -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bug", "expected_hw"),
    [
        (NONE, 5),  # replica 3 is in the ISR: it holds the HW back however stale it is (§2.6)
        (HW_ALL, 10),  # the bug: a stale ISR member no longer counts
        (NO_FETCH, 5),
        (TO_HW, 5),
    ],
)
def test_a_stale_isr_member_holds_the_hw_back_unless_hw_from_all_replicas(
    bug: PlantedBug, expected_hw: int
) -> None:
    p, log = leader(bug, leo=10)
    fetch(p, 3, 5, now=1, leo=10)  # replica 3 reached 5, then stopped fetching
    later = 1 + LAG + 1
    log.log_end_offset = 10
    fetch(p, 2, 10, now=later, leo=10)  # replica 2 is caught up
    assert p.isr == {1, 2, 3}
    assert p.high_watermark == expected_hw


# ---- shrink-on-no-fetch ---------------------------------------------------------------------


def shrink_decision(bug: PlantedBug, story: str) -> frozenset[int]:
    p, _ = leader(bug, leo=100)
    t = 0
    if story == "fetches but never catches up":
        # Replica 2 fetches every second but always from an offset below the leader's LEO at
        # its previous fetch (the leader keeps growing faster than it reads).
        for i in range(1, 2 * LAG // 1000):
            t = i * 1000
            fetch(p, 2, 50 + i, now=t, leo=100 + 10 * i)
        leo = 100 + 10 * (2 * LAG // 1000)
    elif story == "caught up but silent":
        fetch(p, 2, 100, now=1, leo=100)
        t = 1 + 2 * LAG  # no fetch since, but nothing was written either
        leo = 100
    else:
        raise AssertionError(story)
    fetch(p, 3, leo, now=t, leo=leo)  # replica 3 is fine in every story
    proposal = p.maybe_shrink_isr(leo, t)
    return proposal.changed if proposal is not None else frozenset()


@pytest.mark.parametrize(
    ("bug", "story", "removed"),
    [
        # Kafka (§2.4, pitfall 1): behind the leader's LEO *and* not caught up for > lag.
        (NONE, "fetches but never catches up", {2}),
        (NONE, "caught up but silent", set()),
        # The bug: only the time since the last fetch counts.
        (NO_FETCH, "fetches but never catches up", set()),
        (NO_FETCH, "caught up but silent", {2}),
        (HW_ALL, "fetches but never catches up", {2}),
        (TO_HW, "caught up but silent", set()),
    ],
)
def test_isr_shrink_uses_the_caught_up_rule_unless_shrink_on_no_fetch(
    bug: PlantedBug, story: str, removed: set[int]
) -> None:
    assert shrink_decision(bug, story) == removed


# ---- truncate-to-hw -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bug", "mode", "asks"),
    [
        (NONE, TruncationMode.LEADER_EPOCH, 3),
        (HW_ALL, TruncationMode.LEADER_EPOCH, 3),
        (NO_FETCH, TruncationMode.LEADER_EPOCH, 3),
        (TO_HW, TruncationMode.HIGH_WATERMARK, None),  # truncate to the local HW (§4.1)
    ],
)
def test_followers_ask_for_epochs_unless_truncate_to_hw(
    bug: PlantedBug, mode: TruncationMode, asks: int | None
) -> None:
    cache = LeaderEpochCache()
    cache.assign(1, 0)
    cache.assign(3, 7)
    assert truncation_mode(bug) is mode
    assert epoch_to_ask(truncation_mode(bug), cache) == asks


# ---- the setting ----------------------------------------------------------------------------


@pytest.mark.parametrize("bug", list(PlantedBug))
def test_the_setting_names_each_bug(bug: PlantedBug) -> None:
    s = Settings.load(overrides=[f"minibroker.test.planted.bug={bug.value}"], environ={})
    assert s.planted_bug is bug
    assert s.planted_bug.enabled is (bug is not NONE)


def test_no_bug_by_default_and_a_typo_is_an_error() -> None:
    assert Settings.load(environ={}).planted_bug is NONE
    with pytest.raises(ConfigError, match="truncate-to-hw"):
        Settings.load(overrides=["minibroker.test.planted.bug=truncate-to-HW!"], environ={})
