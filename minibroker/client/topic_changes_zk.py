"""Changes to existing topics through ZooKeeper, as Kafka 2.6's AdminZkClient makes them (what
`kafka-topics --zookeeper --alter/--delete` and `kafka-reassign-partitions --zookeeper` write):
more partitions (KIP-195: the whole topic znode rewritten), a topic marked for deletion
(/admin/delete_topics/<t>), and a reassignment through the legacy /admin/reassign_partitions
znode. The controller does the rest."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from minibroker.client.admin_zk import live_brokers
from minibroker.core.assignment import assign_replicas_to_brokers
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import (
    DeleteTopicsTopicZNode,
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicZNode,
)
from minibroker.runtime.zk_store import ZkNodeExists, ZkStore


def read_full_assignment(zk: ZkStore, topic: str) -> tuple[TopicAssignment, int]:
    """The topic znode (with adding/removing replicas) and its zkVersion;
    UNKNOWN_TOPIC_OR_PARTITION if there is none."""
    got = zk.get_or_none(TopicZNode.path(topic))
    if got is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{topic}' does not exist.")
    return TopicZNode.decode(topic, got[0]), got[1].version


def add_partitions(
    zk: ZkStore,
    topic: str,
    total: int,
    new_assignment: Sequence[Sequence[int]] | None = None,
    *,
    validate_only: bool = False,
) -> dict[int, tuple[int, ...]]:
    """AdminManager.createPartitions + AdminZkClient.addPartitions: grow `topic` to `total`
    partitions, the new ones assigned by Kafka's rule (start index at partition 0's first
    broker, numbered on from the existing ones) or as given; the whole topic znode rewritten
    (conditionally on the version read). Returns the new partitions' assignment.

    Raises ApiError: UNKNOWN_TOPIC_OR_PARTITION, REASSIGNMENT_IN_PROGRESS, INVALID_PARTITIONS,
    INVALID_REPLICA_ASSIGNMENT, INVALID_TOPIC_EXCEPTION (being deleted)."""
    current, version = read_full_assignment(zk, topic)
    if zk.exists(DeleteTopicsTopicZNode.path(topic)) is not None:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION, f"The topic '{topic}' is marked for deletion."
        )
    if current.adding_replicas or current.removing_replicas:
        raise ApiError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            f"A partition reassignment is in progress for the topic '{topic}'.",
        )
    existing = len(current.partitions)
    if total < existing:
        raise ApiError(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {existing} partitions, which is higher than the requested "
            f"{total}.",
        )
    if total == existing:
        raise ApiError(ErrorCode.INVALID_PARTITIONS, f"Topic already has {existing} partitions.")
    brokers = sorted(live_brokers(zk))
    partition0 = current.partitions.get(0)
    if not partition0:
        raise ApiError(
            ErrorCode.UNKNOWN_SERVER_ERROR,
            f"Unexpected existing replica assignment for topic '{topic}', partition id 0 is "
            "missing.",
        )
    if new_assignment is not None:
        added = _validated(new_assignment, total - existing, existing, len(partition0), brokers)
    else:
        start = next((i for i, b in enumerate(brokers) if b >= partition0[0]), 0)
        added = assign_replicas_to_brokers(
            brokers, total - existing, len(partition0), start_index=start,
            replica_shift=start, start_partition=existing,
        )  # fmt: skip
    if not validate_only:
        whole = TopicAssignment({**current.partitions, **added})
        zk.set(TopicZNode.path(topic), TopicZNode.encode(whole), version)
    return added


def _validated(
    given: Sequence[Sequence[int]], count: int, first: int, replication: int, brokers: list[int]
) -> dict[int, tuple[int, ...]]:
    """AdminManager/AdminZkClient.validateReplicaAssignment for explicit new partitions."""
    unknown = sorted({b for replicas in given for b in replicas} - set(brokers))
    if unknown:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Unknown broker(s) in replica assignment: {', '.join(map(str, unknown))}.",
        )
    if len(given) != count:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            f"Increasing the number of partitions by {count} but {len(given)} assignments "
            "provided.",
        )
    out = {}
    for i, replicas in enumerate(given):
        p = first + i
        if not replicas:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Cannot have replication factor of 0 for partition id {p}.",
            )
        if len(set(replicas)) != len(replicas):
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Duplicate brokers not allowed in replica assignment: "
                f"{', '.join(map(str, replicas))} for partition id {p}.",
            )
        if len(replicas) != replication:
            raise ApiError(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                "Inconsistent replication factor between partitions, partition 0 has "
                f"{replication} while partitions [{p}] have replication factors "
                f"[{len(replicas)}], respectively.",
            )
        out[p] = tuple(replicas)
    return out


def mark_for_deletion(zk: ZkStore, topic: str) -> bool:
    """AdminZkClient.deleteTopic: create /admin/delete_topics/<topic>. False if it was marked
    already (Kafka answers that request with success too); UNKNOWN_TOPIC_OR_PARTITION if the
    topic does not exist."""
    if zk.exists(TopicZNode.path(topic)) is None:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic `{topic}` to delete does not exist"
        )
    try:
        zk.create(DeleteTopicsTopicZNode.path(topic), b"", makepath=True)
    except ZkNodeExists:
        return False
    return True


def request_reassignment(zk: ZkStore, targets: Mapping[TopicPartition, Sequence[int]]) -> None:
    """The legacy path (`kafka-reassign-partitions --zookeeper --execute`): create
    /admin/reassign_partitions; REASSIGNMENT_IN_PROGRESS while one exists."""
    try:
        zk.create(
            ReassignPartitionsZNode.path,
            ReassignPartitionsZNode.encode({tp: list(r) for tp, r in targets.items()}),
            makepath=True,
        )
    except ZkNodeExists:
        raise ApiError(
            ErrorCode.REASSIGNMENT_IN_PROGRESS,
            "There is an existing assignment running (/admin/reassign_partitions exists).",
        ) from None


def proposal(
    assignment: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int], rng: random.Random
) -> dict[TopicPartition, tuple[int, ...]]:
    """`kafka-reassign-partitions --generate`: each topic's partitions spread over `brokers`
    with Kafka's assignment (its replication factor kept; random start, as Kafka's)."""
    out: dict[TopicPartition, tuple[int, ...]] = {}
    by_topic: dict[str, list[TopicPartition]] = {}
    for tp in assignment:
        by_topic.setdefault(tp.topic, []).append(tp)
    ids = sorted(brokers)
    for _topic, tps in sorted(by_topic.items()):
        replication = len(assignment[tps[0]])
        n = len(ids)
        spread = assign_replicas_to_brokers(
            ids, len(tps), replication, start_index=rng.randrange(n), replica_shift=rng.randrange(n)
        )
        for i, tp in enumerate(sorted(tps)):
            out[tp] = spread[i]
    return out
