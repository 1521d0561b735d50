"""Partition reassignment's sets and decisions (controller.logic.reassignment), from Kafka 2.6's
ReplicaAssignment and KafkaController: the walk-through of onPartitionReassignment's doc comment
({1,2,3} -> {4,5,6}), ReplicaAssignmentTest, validateReplicas' messages
(PlaintextAdminIntegrationTest.testInvalidAlterPartitionReassignments) and cancellation
(ReassignPartitionsIntegrationTest.testCancellation)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.logic.reassignment import (
    ReplicaAssignment,
    build_reassignment,
    is_complete,
    reassignment_leader,
    validate_replicas,
)
from minibroker.core.errors import ErrorCode


def test_the_walk_through_of_kafkas_doc_comment() -> None:
    # RS {1,2,3} -> TRS {4,5,6}: RS {4,5,6,1,2,3}, AR {4,5,6}, RR {1,2,3}.
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 5, 6])
    assert moving == ReplicaAssignment((4, 5, 6, 1, 2, 3), (4, 5, 6), (1, 2, 3))
    assert moving.origin == (1, 2, 3) and moving.target == (4, 5, 6)
    assert moving.is_being_reassigned
    assert not is_complete(moving, isr=(1, 2, 3))  # step A2: the new ones not in sync yet
    assert is_complete(moving, isr=(1, 2, 3, 4, 5, 6))  # phase B
    assert reassignment_leader(moving.target, (1, 2, 3, 4, 5, 6), {1, 2, 3, 4, 5, 6}) == 4  # B3
    assert moving.completed() == ReplicaAssignment((4, 5, 6))  # B6


@pytest.mark.parametrize(
    ("current", "target", "expected"),
    [
        # ReplicaAssignmentTest.testReassignmentWithOverlap and friends.
        ((1, 2, 3), [2, 3, 4], ReplicaAssignment((2, 3, 4, 1), (4,), (1,))),
        ((1, 2, 3), [3, 4, 2], ReplicaAssignment((3, 4, 2, 1), (4,), (1,))),
        ((1, 2, 3), [1, 2, 3], ReplicaAssignment((1, 2, 3))),  # nothing to move
        ((1, 2, 3), [3, 2, 1], ReplicaAssignment((3, 2, 1))),  # a reorder only
        ((1, 2), [1, 2, 3], ReplicaAssignment((1, 2, 3), (3,), ())),  # RF up
        ((1, 2, 3), [1], ReplicaAssignment((1, 2, 3), (), (2, 3))),  # RF down
    ],
)
def test_reassign_to(
    current: tuple[int, ...], target: list[int], expected: ReplicaAssignment
) -> None:
    assert ReplicaAssignment(current).reassign_to(target) == expected


def test_a_new_target_replaces_a_move_in_flight_from_its_origin() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 5, 6])
    replaced = moving.reassign_to([1, 2, 7])
    assert replaced == ReplicaAssignment((1, 2, 7, 3), (7,), (3,))


def test_cancellation_goes_back_to_the_origin() -> None:
    moving = ReplicaAssignment((1, 2, 3)).reassign_to([4, 5, 6])
    assert build_reassignment(moving, None) == ReplicaAssignment((1, 2, 3))
    # Nothing in flight: NO_REASSIGNMENT_IN_PROGRESS (None).
    assert build_reassignment(ReplicaAssignment((1, 2, 3)), None) is None


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ([], "Empty replica list specified in partition reassignment."),
        ([1, 1], "Duplicate replica ids in partition reassignment replica list: List(1, 1)"),
        ([1, -1], "Invalid broker id in replica list: List(1, -1)"),
        ([1, 9], "Replica assignment has brokers that are not alive. Replica list: [9]"),
    ],
)
def test_invalid_targets_are_refused_with_kafkas_messages(target: list[int], message: str) -> None:
    problem = validate_replicas(target, ReplicaAssignment((1, 2)), live_brokers={1, 2, 3})
    assert problem is not None
    assert problem[0] is ErrorCode.INVALID_REPLICA_ASSIGNMENT
    assert problem[1].startswith(message)


def test_a_dead_broker_already_holding_a_replica_may_stay() -> None:
    # Only *adding* replicas must be alive (validateReplicas checks AR, not TRS).
    assert validate_replicas([2, 3], ReplicaAssignment((1, 2)), live_brokers={1, 3}) is None


def test_the_reassignment_leader_is_the_first_live_target_in_the_isr() -> None:
    assert reassignment_leader((4, 5, 6), isr=(5, 6), online={4, 5, 6}) == 5
    assert reassignment_leader((4, 5, 6), isr=(4, 5, 6), online={5, 6}) == 5
    assert reassignment_leader((4, 5), isr=(1, 2), online={1, 2, 4, 5}) is None


brokers = st.lists(st.integers(0, 8), min_size=1, max_size=5, unique=True)


@given(brokers, brokers)
def test_reassignment_sets_hold_together(origin: list[int], target: list[int]) -> None:
    moving = ReplicaAssignment(tuple(origin)).reassign_to(target)
    assert moving.target == tuple(target)  # target replicas first, in the order asked
    assert set(moving.origin) == set(origin)
    assert set(moving.replicas) == set(origin) | set(target)
    assert set(moving.adding) == set(target) - set(origin)
    assert set(moving.removing) == set(origin) - set(target)
    assert is_complete(moving, moving.target)
    # Cancelling returns to the original replicas (their order may change, as in Kafka).
    cancelled = build_reassignment(moving, None)
    if moving.is_being_reassigned:
        assert cancelled is not None and set(cancelled.replicas) == set(origin)
        assert not cancelled.is_being_reassigned
