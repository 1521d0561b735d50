"""Topic creation's pure rules: Kafka's topic-name validation (Topic.validate) and replica
assignment without racks (AdminUtils.assignReplicasToBrokers). The caller draws the random start
index and replica shift, so the same inputs always give the same assignment.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from minibroker.core.errors import ApiError, ErrorCode

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]+")


def validate_topic_name(topic: str) -> None:
    """Raise INVALID_TOPIC_EXCEPTION unless `topic` is a legal Kafka topic name: 1 to 249 of
    [a-zA-Z0-9._-], and not "." or ".." (they would name directories on the brokers)."""
    if not topic:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty"
        )
    if topic in (".", ".."):
        raise ApiError(ErrorCode.INVALID_TOPIC_EXCEPTION, 'Topic name cannot be "." or ".."')
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME_LENGTH} characters,"
            f" topic name: {topic}",
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(topic):
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f'Topic name "{topic}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'",
        )


def colliding_topics(topic: str, existing: Iterable[str]) -> list[str]:
    """Existing topics whose names differ from `topic` only by '.' versus '_': their metric
    names would collide, so Kafka refuses to create such a topic (Topic.hasCollision)."""
    if "." not in topic and "_" not in topic:
        return []
    key = topic.replace(".", "_")
    return sorted(t for t in existing if t != topic and t.replace(".", "_") == key)


def assign_replicas_to_brokers(
    broker_ids: Sequence[int],
    partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    replica_shift: int,
    start_partition: int = 0,
) -> dict[int, tuple[int, ...]]:
    """Kafka's rack-unaware assignment: partition p's first replica (its preferred leader) is
    broker_ids[(start_index + p) % n], so leadership is spread round-robin; the others follow
    at offsets 1 + (shift + j) % (n - 1) from it, the shift growing by one every n partitions
    so that the followers of a broker's partitions spread over the other brokers.

    `broker_ids` are the live brokers (Kafka sorts them by id); `start_index` and
    `replica_shift` are Kafka's two random draws in [0, n). Partitions are numbered from
    `start_partition` (CreatePartitions adds to a topic: Kafka's startPartitionId, with the
    start index and shift fixed to the first broker of partition 0). Raises
    INVALID_PARTITIONS or INVALID_REPLICATION_FACTOR as Kafka does.
    """
    if partitions <= 0:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    n = len(broker_ids)
    if replication_factor > n:
        raise ApiError(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {n}.",
        )
    if start_index < 0 or replica_shift < 0:
        raise ValueError("start_index and replica_shift must be >= 0")
    assignment: dict[int, tuple[int, ...]] = {}
    shift = replica_shift
    for p in range(start_partition, start_partition + partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (start_index + p) % n
        followers = (_replica_index(first, shift, j, n) for j in range(replication_factor - 1))
        assignment[p] = (broker_ids[first], *(broker_ids[i] for i in followers))
    return assignment


def _replica_index(first_index: int, shift: int, j: int, n: int) -> int:
    # Never 0 steps from the first replica, so a partition never gets a broker twice.
    return (first_index + 1 + (shift + j) % (n - 1)) % n
