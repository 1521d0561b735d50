"""The ZooKeeper recorder's pure part: repeated reads are one change, skipped versions are a
gap it says out loud, late reads are ignored."""

from __future__ import annotations

from minibroker.core.types import LeaderAndIsr
from minibroker.scenarios.history import History
from minibroker.scenarios.timeline import Timeline
from minibroker.scenarios.zk_recorder import ZkTracker


def _tracker() -> ZkTracker:
    return ZkTracker(History("t", {0: (1, 2, 3)}), Timeline(start_ms=0))


def _state(version: int, leader: int = 1, epoch: int = 0) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, (1, 2, 3), 1, version)


def test_each_version_of_a_state_is_recorded_once() -> None:
    t = _tracker()
    for version, ts in ((0, 10), (0, 20), (1, 30), (1, 40), (0, 50)):  # (0, 50): a late read
        t.observe_state(0, _state(version), ts)
    assert [(s.zk_version, s.ts_ms) for s in t.history.states] == [(0, 10), (1, 30)]
    assert t.history.zk_gaps == []


def test_skipped_versions_are_a_gap() -> None:
    t = _tracker()
    t.observe_state(0, _state(0), 10)
    t.observe_state(0, _state(3, leader=2, epoch=1), 20)
    [gap] = t.history.zk_gaps
    assert (gap.after_version, gap.seen_version, gap.missed) == (0, 3, 2)
    assert gap.path == "/brokers/topics/t/partitions/0/state"
    assert t.timeline is not None
    assert any("missed 2 version(s)" in e.text for e in t.timeline.entries)


def test_a_deleted_state_is_recorded_as_version_minus_one() -> None:
    t = _tracker()
    t.observe_state(0, None, 5)  # not there yet: nothing to record
    t.observe_state(0, _state(0), 10)
    t.observe_state(0, None, 20)
    assert [s.zk_version for s in t.history.states] == [0, -1]


def test_controller_changes_and_epoch_gaps() -> None:
    t = _tracker()
    t.observe_controller(101, 1, 10)
    t.observe_controller(101, 1, 15)
    t.observe_controller(None, 1, 20)
    t.observe_controller(102, 2, 30)
    t.observe_controller(101, 4, 40)
    t.observe_controller(102, 2, 45)  # a late read
    assert [(c.controller_id, c.controller_epoch) for c in t.history.controllers] == [
        (101, 1),
        (None, 1),
        (102, 2),
        (101, 4),
    ]
    [gap] = t.history.zk_gaps
    assert gap.missed == 1


def test_broker_registrations_count_child_changes() -> None:
    t = _tracker()
    t.observe_brokers({1: 10, 2: 11, 3: 12}, 3, 5)
    t.observe_brokers({1: 10, 2: 11, 3: 12}, 3, 6)
    t.observe_brokers({1: 10, 2: 11}, 4, 7)  # 3 went: one child change
    t.observe_brokers({1: 10, 2: 11, 3: 20}, 5, 8)  # 3 came back
    assert t.history.zk_gaps == []
    t.observe_brokers({1: 10, 2: 30, 3: 20}, 9, 9)  # 2 bounced (2 changes) and 2 more unseen
    [gap] = t.history.zk_gaps
    assert gap.missed == 2
    t.observe_brokers({1: 10, 2: 30, 3: 20}, 11, 10)  # gone and back between two reads
    assert len(t.history.zk_gaps) == 2
    assert [sorted(b.brokers) for b in t.history.brokers] == [
        [1, 2, 3],
        [1, 2],
        [1, 2, 3],
        [1, 2, 3],
    ]
