"""Small value types every layer shares: topic-partitions and the leader/ISR record."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

# Reference §0.1, from kafka/api/LeaderAndIsr.scala.
NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0
# KafkaController.InitialControllerEpoch: the first elected controller gets epoch 1.
INITIAL_CONTROLLER_EPOCH = 0
# Kafka's Topic.INTERNAL_TOPICS: written only by their coordinators.
OFFSETS_TOPIC = "__consumer_offsets"
TRANSACTION_STATE_TOPIC = "__transaction_state"
INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC})


class TopicPartition(NamedTuple):
    """A topic-partition. A named tuple: brokers look thousands of them up per fetch, and a
    tuple's hash and equality run in C (a dataclass's, even with a cached hash, ran Python
    for every dictionary look-up: 3-5x slower). Ordered as (topic, partition)."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True)
class LeaderAndIsr:
    """The content of a partition's state znode plus the znode's zkVersion (reference §1.5).

    `controller_epoch` is the epoch of the controller that made the last leadership decision,
    not necessarily the current controller's (reference §9 pitfall 14).
    """

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = INITIAL_ZK_VERSION
