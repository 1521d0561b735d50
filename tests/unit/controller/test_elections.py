"""Table tests of the controller's election and ISR-removal rules (reference §1.5, §5.5, §5.6)."""

from __future__ import annotations

import pytest

from controller.logic.batch import RequestBatch
from controller.logic.context import BrokerInfo, ControllerContext
from controller.logic.elections import (
    controlled_shutdown_election,
    imbalanced_brokers,
    initial_state,
    offline_election,
    preferred_election,
    remove_from_isr,
)
from minibroker.core.types import LeaderAndIsr, TopicPartition

E = 7  # this controller's epoch
A = (1, 2, 3)  # assignment order


def st(leader: int, isr: tuple[int, ...], epoch: int = 4, version: int = 9) -> LeaderAndIsr:
    return LeaderAndIsr(leader, epoch, isr, 3, version)


@pytest.mark.parametrize(
    ("assignment", "online", "expected"),
    [
        ((1, 2, 3), {1, 2, 3}, (1, (1, 2, 3))),
        ((2, 3, 1), {1, 3}, (3, (3, 1))),  # first *online* replica leads; ISR in assignment order
        ((1, 2, 3), set(), None),  # nobody online: the partition stays New
    ],
)
def test_initial_state(
    assignment: tuple[int, ...], online: set[int], expected: tuple[int, tuple[int, ...]] | None
) -> None:
    got = initial_state(assignment, online, E)
    if expected is None:
        assert got is None
    else:
        assert got == LeaderAndIsr(expected[0], 0, expected[1], E)


@pytest.mark.parametrize(
    ("state", "online", "unclean", "expected"),
    [
        # §5.6 table, row 1: leader 1 dies; first live ISR member in assignment order is 2.
        (st(1, (1, 2, 3)), {2, 3}, False, (2, (2, 3), False)),
        # Assignment order, not ISR order (pitfall 19).
        (st(1, (3, 1, 2)), {2, 3}, False, (2, (3, 2), False)),
        # Row 2: 1 and 2 die together with ISR [1, 2]: no live ISR member, election fails.
        (st(1, (1, 2)), {3}, False, None),
        # ... unless unclean election is enabled: first live replica, ISR = [leader].
        (st(1, (1, 2)), {3}, True, (3, (3,), True)),
        # Row 3 when broker 1 returns: ISR [1] with leader -1 elects 1 again.
        (st(-1, (1,)), {1, 2, 3}, False, (1, (1,), False)),
    ],
)
def test_offline_election(
    state: LeaderAndIsr,
    online: set[int],
    unclean: bool,
    expected: tuple[int, tuple[int, ...], bool] | None,
) -> None:
    got = offline_election(A, state, online, unclean, E)
    if expected is None:
        assert got is None
        return
    assert got is not None
    assert (got.state.leader, got.state.isr, got.unclean) == expected
    assert got.state.leader_epoch == state.leader_epoch + 1  # every election bumps the epoch
    assert got.state.controller_epoch == E
    assert got.state.zk_version == state.zk_version  # the write is conditional on it


@pytest.mark.parametrize(
    ("state", "replica", "expected"),
    [
        (st(1, (1, 2, 3)), 3, (1, (1, 2))),  # a follower goes: epoch still bumped (pitfall 12)
        (st(1, (1, 2)), 1, (-1, (2,))),  # the leader goes: leader -1
        (st(1, (1,)), 1, (-1, (1,))),  # the last member stays listed: never an empty ISR
        (st(2, (2, 3)), 1, None),  # not in the ISR: nothing to write
    ],
)
def test_remove_from_isr(
    state: LeaderAndIsr, replica: int, expected: tuple[int, tuple[int, ...]] | None
) -> None:
    got = remove_from_isr(state, replica, E)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert (got.leader, got.isr, got.leader_epoch) == (*expected, state.leader_epoch + 1)


def test_controlled_shutdown_moves_leadership_to_a_non_shutting_down_isr_member() -> None:
    got = controlled_shutdown_election(A, st(1, (1, 2, 3)), {1, 2, 3}, {1}, E)
    assert got is not None and (got.leader, got.isr) == (2, (2, 3))
    assert controlled_shutdown_election(A, st(1, (1,)), {1, 2, 3}, {1}, E) is None


def test_preferred_election_needs_the_head_online_and_in_the_isr() -> None:
    got = preferred_election(A, st(2, (1, 2, 3)), {1, 2, 3}, E)
    assert got is not None and (got.leader, got.isr) == (1, (1, 2, 3))
    assert preferred_election(A, st(2, (2, 3)), {1, 2, 3}, E) is None  # 1 not in ISR
    assert preferred_election(A, st(1, (1, 2)), {1, 2, 3}, E) is None  # already leads


def test_imbalance_check_uses_the_percentage_of_preferred_partitions_led_elsewhere() -> None:
    assignments = {"a": (1, 2), "b": (1, 2), "c": (2, 1)}
    assert imbalanced_brokers(assignments, {"a": 1, "b": 1, "c": 2}, 10) == set()
    assert imbalanced_brokers(assignments, {"a": 2, "b": 1, "c": 2}, 10) == {1}
    assert imbalanced_brokers(assignments, {"a": 2, "b": 1, "c": 2}, 50) == set()


def test_leader_and_isr_always_brings_update_metadata_for_every_broker() -> None:
    tp = TopicPartition("t", 0)
    batch = RequestBatch()
    batch.add_leader_and_isr([2, 3], tp, {1, 2, 3})
    assert batch.leader_and_isr == {2: {tp}, 3: {tp}}
    assert batch.update_metadata_to == {1, 2, 3}
    assert batch.update_metadata_partitions == {tp}


def test_context_online_excludes_shutting_down_brokers() -> None:
    ctx = ControllerContext(live_brokers={b: BrokerInfo(b, 10 + b, "h", 9000 + b) for b in A})
    ctx.assignments[TopicPartition("t", 0)] = A
    ctx.states[TopicPartition("t", 0)] = st(1, A)
    ctx.shutting_down.add(1)
    assert ctx.online() == {2, 3}
    assert ctx.live_or_shutting_down() == {1, 2, 3}
    assert ctx.offline_partitions() == [TopicPartition("t", 0)]
    ctx.topic_configs["t"] = {"unclean.leader.election.enable": "true"}
    assert ctx.unclean_allowed("t", False) and not ctx.unclean_allowed("u", False)
