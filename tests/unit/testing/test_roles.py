"""Roles resolved against what ZooKeeper says at the moment (minibroker/testing/roles.py);
a coordinator is the leader of the key's partition of Kafka's internal topic
(GroupMetadataManager.partitionFor: abs(groupId.hashCode) % offsets.topic.num.partitions)."""

from __future__ import annotations

import pytest

from minibroker.chaos import ChaosError
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.testing import active_controller, coordinator_of, follower_of, leader_of


class Fake:
    def __init__(self, states: dict[TopicPartition, LeaderAndIsr], controller: int | None = 101,
                 counts: dict[str, int] | None = None) -> None:  # fmt: skip
        self.states, self.controller, self.counts = states, controller, counts or {}

    def read_controller(self) -> int | None:
        return self.controller

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        return self.states.get(tp)

    def read_topic_partition_count(self, topic: str) -> int | None:
        return self.counts.get(topic)


def state(leader: int, isr: list[int]) -> LeaderAndIsr:
    return LeaderAndIsr(leader=leader, leader_epoch=3, isr=tuple(isr), controller_epoch=1)


def test_leader_and_follower_are_read_when_resolved() -> None:
    fake = Fake({TopicPartition("orders", 1): state(2, [2, 3, 1])})
    role = leader_of("orders", 1)
    assert role.resolve(fake) == ("broker-2", "the leader of orders-1")
    assert follower_of("orders", 1).resolve(fake)[0] == "broker-1"  # the last in-sync follower
    fake.states[TopicPartition("orders", 1)] = state(3, [3])
    assert role.resolve(fake)[0] == "broker-3"  # the same role, resolved later: the new leader
    with pytest.raises(ChaosError, match="no in-sync follower"):
        follower_of("orders", 1).resolve(fake)


def test_no_leader_and_no_controller_are_errors_that_say_so() -> None:
    fake = Fake({TopicPartition("orders", 0): state(-1, [])}, controller=None)
    with pytest.raises(ChaosError, match="orders-0 has no leader"):
        leader_of("orders").resolve(fake)
    with pytest.raises(ChaosError, match="no controller is elected"):
        active_controller().resolve(fake)
    assert active_controller().resolve(Fake({}, controller=102))[0] == "controller-2"


def test_a_coordinator_is_the_leader_of_the_keys_partition() -> None:
    # "g": Java's "g".hashCode() is 103; 103 % 50 = 3. "txn-1" % 50: computed by hand below.
    txn = sum(ord(ch) * 31 ** (len("txn-1") - 1 - i) for i, ch in enumerate("txn-1"))
    txn_partition = abs((txn + 2**31) % 2**32 - 2**31) % 50
    fake = Fake(
        {
            TopicPartition("__consumer_offsets", 3): state(2, [2, 1]),
            TopicPartition("__transaction_state", txn_partition): state(3, [3, 1]),
        },
        counts={"__consumer_offsets": 50, "__transaction_state": 50},
    )
    name, why = coordinator_of(group="g").resolve(fake)
    assert name == "broker-2"
    assert why == "the coordinator of group 'g': the leader of __consumer_offsets-3"
    assert coordinator_of(transactional_id="txn-1").resolve(fake)[0] == "broker-3"
    with pytest.raises(ChaosError, match="does not exist yet"):
        coordinator_of(group="g").resolve(Fake({}))
    with pytest.raises(ValueError, match="one of them"):
        coordinator_of()
