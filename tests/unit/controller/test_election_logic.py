"""Table tests of the controller election decisions (reference §5.1)."""

from __future__ import annotations

import pytest

from controller.logic.election import (
    Role,
    attempt_was_ours,
    must_resign,
    next_epoch,
    should_try_election,
)


@pytest.mark.parametrize(("controller_in_zk", "expected"), [(None, True), (101, False), (7, False)])
def test_should_try_election_only_without_a_controller(
    controller_in_zk: int | None, expected: bool
) -> None:
    assert should_try_election(controller_in_zk) is expected


def test_next_epoch_from_initial_is_one() -> None:
    # KafkaController.InitialControllerEpoch = 0: the first elected controller gets epoch 1.
    assert next_epoch(0) == 1


@pytest.mark.parametrize(
    ("controller_in_zk", "epoch_in_zk", "expected"),
    [
        (101, 5, True),  # our multi went through before a connection loss: we won
        (102, 5, False),  # another controller won the same epoch
        (101, 6, False),  # we are named but the epoch moved on: not this attempt
        (None, 5, False),  # nobody: the epoch moved and its winner died
        (101, None, False),
    ],
)
def test_attempt_was_ours(
    controller_in_zk: int | None, epoch_in_zk: int | None, expected: bool
) -> None:
    assert attempt_was_ours(101, 5, controller_in_zk, epoch_in_zk) is expected


@pytest.mark.parametrize(
    ("role", "controller_in_zk", "expected"),
    [
        (Role.ACTIVE, 101, False),
        (Role.ACTIVE, 102, True),
        (Role.ACTIVE, None, True),
        (Role.STANDBY, 102, False),
        (Role.STANDBY, None, False),
    ],
)
def test_must_resign(role: Role, controller_in_zk: int | None, expected: bool) -> None:
    assert must_resign(role, 101, controller_in_zk) is expected
