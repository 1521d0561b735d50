"""Controller election decisions (reference §5.1), as small pure functions.

The shell reads ZooKeeper, asks these functions what to do, and performs it. The election
itself is one ZooKeeper multi {create /controller, set /controller_epoch = epoch + 1 at the
zkVersion just read}; these rules decide when to try it, how to read a failed attempt, and when
an active controller must resign.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Role(Enum):
    STANDBY = "standby"
    ACTIVE = "active"


@dataclass(frozen=True)
class ActiveEpoch:
    """The epoch this controller won, and /controller_epoch's zkVersion that fences its writes."""

    epoch: int
    epoch_zk_version: int


def should_try_election(controller_in_zk: int | None) -> bool:
    """Kafka's elect(): stop if someone is controller already, otherwise try."""
    return controller_in_zk is None


def next_epoch(current_epoch: int) -> int:
    return current_epoch + 1


def attempt_was_ours(
    my_id: int, attempted_epoch: int, controller_in_zk: int | None, epoch_in_zk: int | None
) -> bool:
    """After the election multi failed with NODEEXISTS or BADVERSION: was it our own multi,
    retried after a connection loss? Yes iff /controller names us and the epoch is the one we
    tried to write (reference §5.1 step 3). Otherwise another controller won."""
    return controller_in_zk == my_id and epoch_in_zk == attempted_epoch


def must_resign(role: Role, my_id: int, controller_in_zk: int | None) -> bool:
    """ControllerChange / Reelect → maybeResign: an active controller that is no longer the one
    named in /controller (another won, or the znode is gone) stops acting at once."""
    return role is Role.ACTIVE and controller_in_zk != my_id
