"""Partition leader elections and ISR removal, as small pure functions (reference §1.5, §5.5,
§5.6; Kafka's controller/Election.scala). Every function returns the new partition state with
the leader epoch bumped and this controller's epoch, or None when no change is possible."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from minibroker.core.types import INITIAL_LEADER_EPOCH, NO_LEADER, LeaderAndIsr

K = TypeVar("K")


def initial_state(
    assignment: Sequence[int], online: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """A new partition: leader = first online replica, ISR = the online replicas in assignment
    order, epoch 0 (reference §1.5); None while no replica is online (it stays New)."""
    alive = tuple(b for b in assignment if b in online)
    if not alive:
        return None
    return LeaderAndIsr(alive[0], INITIAL_LEADER_EPOCH, alive, controller_epoch)


@dataclass(frozen=True)
class Elected:
    state: LeaderAndIsr
    unclean: bool = False


def offline_election(
    assignment: Sequence[int],
    state: LeaderAndIsr,
    online: Collection[int],
    unclean_allowed: bool,
    controller_epoch: int,
) -> Elected | None:
    """Reference §5.5 (pitfall 19): the first replica *in assignment order* that is online and
    in the ISR; new ISR = ISR ∩ online. Without one, an unclean election (first online replica,
    ISR = [leader]) only if allowed; otherwise None and the state is left alone."""
    live_isr = [b for b in state.isr if b in online]
    leader = next((b for b in assignment if b in online and b in state.isr), None)
    if leader is not None:
        return Elected(_bump(state, leader, tuple(live_isr), controller_epoch))
    if unclean_allowed:
        leader = next((b for b in assignment if b in online), None)
        if leader is not None:
            return Elected(_bump(state, leader, (leader,), controller_epoch), unclean=True)
    return None


def controlled_shutdown_election(
    assignment: Sequence[int],
    state: LeaderAndIsr,
    registered: Collection[int],
    shutting_down: Collection[int],
    controller_epoch: int,
) -> LeaderAndIsr | None:
    """Reference §5.5: leader = first in assignment order that is registered, in the ISR and
    not shutting down; new ISR = ISR minus every shutting-down broker."""
    leader = next(
        (b for b in assignment if b in registered and b in state.isr and b not in shutting_down),
        None,
    )
    if leader is None:
        return None
    isr = tuple(b for b in state.isr if b not in shutting_down)
    return _bump(state, leader, isr, controller_epoch)


def preferred_election(
    assignment: Sequence[int], state: LeaderAndIsr, online: Collection[int], controller_epoch: int
) -> LeaderAndIsr | None:
    """Reference §5.5: the assignment's head, if online and in the ISR; ISR unchanged. None if
    it is not electable or already leads."""
    preferred = assignment[0] if assignment else None
    if preferred is None or preferred == state.leader:
        return None
    if preferred not in online or preferred not in state.isr:
        return None
    return _bump(state, preferred, state.isr, controller_epoch)


def remove_from_isr(
    state: LeaderAndIsr, replica: int, controller_epoch: int
) -> LeaderAndIsr | None:
    """Reference §5.6: drop a replica that went offline. The leader becomes -1 if it was the
    leader; the ISR is never written empty (its last member stays listed); the epoch is bumped
    even when only a follower goes (pitfall 12). None if the replica is not in the ISR."""
    if replica not in state.isr:
        return None
    leader = NO_LEADER if state.leader == replica else state.leader
    isr = state.isr if len(state.isr) == 1 else tuple(b for b in state.isr if b != replica)
    return _bump(state, leader, isr, controller_epoch)


def _bump(
    state: LeaderAndIsr, leader: int, isr: tuple[int, ...], controller_epoch: int
) -> LeaderAndIsr:
    return LeaderAndIsr(leader, state.leader_epoch + 1, isr, controller_epoch, state.zk_version)


def imbalanced_brokers(
    assignments: Mapping[K, Sequence[int]],
    leaders: Mapping[K, int],
    imbalance_pct: int,
) -> set[int]:
    """Kafka's auto leader rebalance check: a broker is imbalanced when more than
    leader.imbalance.per.broker.percentage of the partitions it prefers are led elsewhere."""
    preferred_count: dict[int, int] = {}
    not_led: dict[int, int] = {}
    for key, replicas in assignments.items():
        if not replicas:
            continue
        preferred = replicas[0]
        preferred_count[preferred] = preferred_count.get(preferred, 0) + 1
        if leaders.get(key) != preferred:
            not_led[preferred] = not_led.get(preferred, 0) + 1
    return {
        b for b, total in preferred_count.items() if not_led.get(b, 0) * 100 > imbalance_pct * total
    }
