"""Small value types every layer shares: topic-partitions and the leader/ISR record."""

from __future__ import annotations

from dataclasses import dataclass

# Reference §0.1, from kafka/api/LeaderAndIsr.scala.
NO_LEADER = -1
LEADER_DURING_DELETE = -2
INITIAL_LEADER_EPOCH = 0
INITIAL_ZK_VERSION = 0
# KafkaController.InitialControllerEpoch: the first elected controller gets epoch 1.
INITIAL_CONTROLLER_EPOCH = 0


@dataclass(frozen=True, order=True)
class TopicPartition:
    """A topic-partition. Brokers look thousands of them up per fetch: the hash is computed
    once, and equality checks identity first."""

    topic: str
    partition: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.topic, self.partition)))

    def __hash__(self) -> int:
        return self._hash  # type: ignore[attr-defined,no-any-return]

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, TopicPartition):
            return NotImplemented
        return self.topic == other.topic and self.partition == other.partition

    def __reduce__(self) -> tuple[type[TopicPartition], tuple[str, int]]:
        # Rebuilt, not copied: a string's hash differs between processes (Spark's pickles).
        return (TopicPartition, (self.topic, self.partition))

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
