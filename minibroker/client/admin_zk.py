"""Topic administration through ZooKeeper, as Kafka's AdminZkClient: create a topic (its config
first, then the assignment the controller watches), read topics back, and request a preferred
replica election. The controller does the rest; nothing here writes partition states.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from minibroker.client.errors import ClientError
from minibroker.core.assignment import (
    assign_replicas_to_brokers,
    colliding_topics,
    validate_topic_name,
)
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.topic_config import validate_topic_config
from minibroker.core.types import NO_LEADER, LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerRegistration,
    ConfigEntityZNode,
    DeleteTopicsTopicZNode,
    PreferredReplicaElectionZNode,
    TopicAssignment,
    TopicsZNode,
    TopicZNode,
    ZNodeFormatError,
)
from minibroker.runtime.waiting import WaitTimeout, wait_until
from minibroker.runtime.zk_store import ZkNodeExists, ZkNoNode, ZkStore


class ElectionInProgress(ClientError):
    """/admin/preferred_replica_election exists: the controller has not finished the last one."""


@dataclass(frozen=True)
class TopicInfo:
    """What ZooKeeper holds about a topic: assignment, config overrides and the partition
    states that exist so far (the controller creates them after the assignment appears)."""

    topic: str
    assignment: Mapping[int, tuple[int, ...]]
    config: Mapping[str, str]
    states: Mapping[int, LeaderAndIsr]
    marked_for_deletion: bool = False
    # A reassignment in flight (KIP-455): per partition the replicas being added and removed.
    adding: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    removing: Mapping[int, tuple[int, ...]] = field(default_factory=dict)

    def partitions_without_leader(self) -> list[int]:
        return [
            p
            for p in sorted(self.assignment)
            if p not in self.states or self.states[p].leader == NO_LEADER
        ]


# ---- reads -------------------------------------------------------------------------------------


def _children(zk: ZkStore, path: str) -> list[str]:
    try:
        return zk.children(path)
    except ZkNoNode:
        return []


def live_brokers(zk: ZkStore) -> dict[int, BrokerRegistration]:
    """Every registered broker by id; registrations that vanish or do not decode are skipped."""
    out: dict[int, BrokerRegistration] = {}
    for child in _children(zk, BrokerIdsZNode.path):
        if not child.isdigit():
            continue
        got = zk.get_or_none(BrokerIdZNode.path(int(child)))
        if got is None:
            continue
        try:
            out[int(child)] = BrokerIdZNode.decode(int(child), got[0])
        except ZNodeFormatError:
            continue
    return dict(sorted(out.items()))


def all_topics(zk: ZkStore) -> list[str]:
    return sorted(_children(zk, TopicsZNode.path))


def read_topic_config(zk: ZkStore, topic: str) -> dict[str, str]:
    got = zk.get_or_none(ConfigEntityZNode.path("topics", topic))
    return ConfigEntityZNode.decode(got[0]) if got is not None and got[0] else {}


def read_assignment(zk: ZkStore, topic: str) -> dict[int, tuple[int, ...]] | None:
    """Replica lists by partition, or None if /brokers/topics/<topic> does not exist."""
    got = zk.get_or_none(TopicZNode.path(topic))
    if got is None:
        return None
    return dict(sorted(TopicZNode.decode(topic, got[0]).partitions.items()))


def read_topic(zk: ZkStore, topic: str) -> TopicInfo | None:
    """The topic as ZooKeeper has it, or None if /brokers/topics/<topic> does not exist."""
    got = zk.get_or_none(TopicZNode.path(topic))
    if got is None:
        return None
    full = TopicZNode.decode(topic, got[0])
    assignment = dict(sorted(full.partitions.items()))
    states = {}
    for p in sorted(assignment):
        state = zk.read_partition_state(TopicPartition(topic, p))
        if state is not None:
            states[p] = state
    return TopicInfo(
        topic=topic,
        assignment=assignment,
        config=read_topic_config(zk, topic),
        states=states,
        marked_for_deletion=zk.exists(DeleteTopicsTopicZNode.path(topic)) is not None,
        adding=dict(full.adding_replicas),
        removing=dict(full.removing_replicas),
    )


def read_topic_or_raise(zk: ZkStore, topic: str) -> TopicInfo:
    info = read_topic(zk, topic)
    if info is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
    return info


# ---- topic creation (AdminZkClient.createTopic) -----------------------------------------------


def _validate_create(zk: ZkStore, topic: str, config: Mapping[str, str]) -> None:
    validate_topic_name(topic)
    validate_topic_config(config)
    if zk.exists(DeleteTopicsTopicZNode.path(topic)) is not None:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' is marked for deletion.")
    if zk.exists(TopicZNode.path(topic)) is not None:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    colliding = colliding_topics(topic, all_topics(zk))
    if colliding:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}",
        )


def _set_or_create(zk: ZkStore, path: str, data: bytes) -> None:
    # Kafka's setOrCreateEntityConfigs: a config left by an earlier topic of that name is
    # overwritten, not an error.
    try:
        zk.set(path, data)
    except ZkNoNode:
        try:
            zk.create(path, data, makepath=True)
        except ZkNodeExists:
            zk.set(path, data)


def create_topic(
    zk: ZkStore,
    topic: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str],
    rng: random.Random,
    *,
    validate_only: bool = False,
    replica_assignment: Mapping[int, Sequence[int]] | None = None,
) -> TopicAssignment:
    """Validate, assign replicas over the live brokers (or take `replica_assignment`, checked
    by Kafka's validateTopicCreate rules), write /config/topics/<topic> (always, as Kafka does,
    even when empty) and then /brokers/topics/<topic>; with `validate_only`, everything but the
    writes (Kafka's CreateTopics validateOnly).

    Raises ApiError: INVALID_TOPIC_EXCEPTION, INVALID_CONFIG, TOPIC_ALREADY_EXISTS,
    INVALID_PARTITIONS, INVALID_REPLICATION_FACTOR or INVALID_REPLICA_ASSIGNMENT.
    """
    _validate_create(zk, topic, config)
    if replica_assignment is not None:
        validate_explicit_assignment(replica_assignment)
        assignment = TopicAssignment({p: tuple(r) for p, r in replica_assignment.items()})
    else:
        assignment = drawn_assignment(sorted(live_brokers(zk)), partitions, replication_factor, rng)
    if not validate_only:
        write_new_topic(zk, topic, assignment, config)
    return assignment


def write_new_topic(
    zk: ZkStore, topic: str, assignment: TopicAssignment, config: Mapping[str, str]
) -> None:
    """AdminZkClient.createTopicWithAssignment's writes, TOPIC_ALREADY_EXISTS if the topic's
    znode appeared meanwhile. Config first: the controller reacts to the assignment and must
    find the overrides (e.g. unclean.leader.election.enable) in place. As in Kafka, the two
    writes are not atomic."""
    _set_or_create(zk, ConfigEntityZNode.path("topics", topic), ConfigEntityZNode.encode(config))
    try:
        zk.create(TopicZNode.path(topic), TopicZNode.encode(assignment), makepath=True)
    except ZkNodeExists:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.") from None


def drawn_assignment(
    broker_ids: Sequence[int], partitions: int, replication_factor: int, rng: random.Random
) -> TopicAssignment:
    """AdminUtils.assignReplicasToBrokers over `broker_ids`, its random draws from `rng`."""
    n = max(1, len(broker_ids))
    # Kafka's two random draws (AdminUtils.rand.nextInt(brokers)): where the leaders start,
    # and the followers' first shift.
    start_index, replica_shift = rng.randrange(n), rng.randrange(n)
    return TopicAssignment(
        assign_replicas_to_brokers(
            broker_ids,
            partitions,
            replication_factor,
            start_index=start_index,
            replica_shift=replica_shift,
        )
    )


def validate_explicit_assignment(assignment: Mapping[int, Sequence[int]]) -> None:
    """AdminZkClient.validateTopicCreate's assignment rules: one replication factor for every
    partition, no broker twice in a partition, partitions numbered 0..n-1. (Like Kafka, the
    brokers are not checked: a replica on a broker that is not there yet waits for it.)"""
    if not assignment or len({len(r) for r in assignment.values()}) != 1:
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "All partitions should have the same number of replicas",
        )
    if any(len(r) != len(set(r)) for r in assignment.values()) or any(
        not r for r in assignment.values()
    ):
        shown = {p: list(r) for p, r in sorted(assignment.items())}
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Duplicate replica assignment found: {shown}"
        )
    if sorted(assignment) != list(range(len(assignment))):
        raise ApiError(
            ErrorCode.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )


# ---- preferred replica election (legacy /admin/preferred_replica_election) --------------------


def election_partitions(
    zk: ZkStore, topic: str | None = None, partition: int | None = None
) -> list[TopicPartition]:
    """The partitions to elect: one, a topic's, or every topic's. UNKNOWN_TOPIC_OR_PARTITION
    for a topic or partition that does not exist."""
    if topic is None:
        return [TopicPartition(t, p) for t in all_topics(zk) for p in read_assignment(zk, t) or {}]
    assignment = read_assignment(zk, topic)
    if assignment is None:
        raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{topic}' does not exist.")
    if partition is None:
        return [TopicPartition(topic, p) for p in assignment]
    if partition not in assignment:
        raise ApiError(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            f"Topic '{topic}' has no partition {partition}.",
        )
    return [TopicPartition(topic, partition)]


def request_preferred_replica_election(zk: ZkStore, partitions: Iterable[TopicPartition]) -> None:
    """Create /admin/preferred_replica_election; the controller elects and deletes it."""
    path = PreferredReplicaElectionZNode.path
    try:
        zk.create(path, PreferredReplicaElectionZNode.encode(sorted(partitions)), makepath=True)
    except ZkNodeExists:
        raise ElectionInProgress(
            f"a preferred replica election is already in progress ({path} exists); "
            "try again once the controller has deleted it"
        ) from None


def election_in_progress(zk: ZkStore) -> bool:
    return zk.exists(PreferredReplicaElectionZNode.path) is not None


class LeadersTimeout(ClientError):
    """Some partitions of a new topic got no leader in time (no controller running?)."""


def wait_for_leaders(zk: ZkStore, topic: str, timeout_ms: int) -> None:
    """Until every partition's state znode exists with a leader (the controller wrote it)."""

    def leaderless() -> list[int]:
        info = read_topic(zk, topic)
        return info.partitions_without_leader() if info is not None else []

    try:
        wait_until(
            lambda: not leaderless(), timeout_s=timeout_ms / 1000, what=topic, interval_s=0.1
        )
    except WaitTimeout:
        missing = ",".join(str(p) for p in leaderless())
        raise LeadersTimeout(
            f"timed out after {timeout_ms} ms waiting for leaders of topic '{topic}' "
            f"(partitions without one: {missing}); is a controller running?"
        ) from None


def ensure_topic(
    zk: ZkStore,
    topic: str,
    partitions: int,
    replication_factor: int,
    config: Mapping[str, str],
    *,
    wait_timeout_ms: int | None,
    rng: random.Random,
) -> bool:
    """Create the topic unless it exists (Kafka's --if-not-exists), then, with a timeout, wait
    until every partition has a leader. Whether it was created."""
    created = True
    try:
        create_topic(zk, topic, partitions, replication_factor, config, rng)
    except ApiError as exc:
        if exc.code is not ErrorCode.TOPIC_ALREADY_EXISTS:
            raise
        created = False
    if wait_timeout_ms is not None:
        wait_for_leaders(zk, topic, wait_timeout_ms)
    return created
