"""Many topics created at once through ZooKeeper, as a Metadata request naming unknown topics
makes them (Kafka 2.6's KafkaApis.createTopic: one AdminZkClient.createTopic per topic, with
the broker's num.partitions and default.replication.factor and no config overrides).

Kafka reads and writes ZooKeeper several times per topic, in turn (and lists every topic for
each one's collision check); here the batch is checked against one read of the topics,
deletion marks and brokers, and written in pipelined multis of many topics each, so thousands
of topics take well under a second of ZooKeeper time rather than a dozen round trips each."""

from __future__ import annotations

import random
from collections.abc import Iterable

from minibroker.client.admin_zk import (
    all_topics,
    drawn_assignment,
    live_brokers,
    write_new_topic,
)
from minibroker.core.assignment import colliding_topics, validate_topic_name
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.zk_layout import (
    ConfigEntityZNode,
    DeleteTopicsZNode,
    TopicAssignment,
    TopicsZNode,
    TopicZNode,
)
from minibroker.runtime.zk_client import WriteOp
from minibroker.runtime.zk_store import ZkNoNode, ZkStore

# A multi's size: up to 50 topics (100 small writes in one request), and bytes well below
# ZooKeeper's 1 MiB request limit (jute.maxbuffer) when topics have many partitions.
MULTI_TOPICS = 50
MULTI_BYTES = 256 * 1024


def create_topics(
    zk: ZkStore,
    topics: Iterable[str],
    partitions: int,
    replication_factor: int,
    rng: random.Random,
) -> dict[str, ApiError | None]:
    """Each topic by admin_zk.create_topic's rules, in order (one colliding with a topic
    created earlier in the batch is refused, as Kafka's creations in turn would refuse it):
    each topic's config is written with (and before) the assignment the controller watches.
    Per topic, None (created) or its ApiError: INVALID_TOPIC_EXCEPTION, TOPIC_ALREADY_EXISTS
    (also when another creator won the race) or INVALID_REPLICATION_FACTOR. ZkError if
    ZooKeeper cannot be reached (some topics may have been created)."""
    existing = set(all_topics(zk))
    try:
        deleting = set(zk.children(DeleteTopicsZNode.path))
    except ZkNoNode:
        deleting = set()
    by_collision_key: dict[str, set[str]] = {}
    for t in existing:
        by_collision_key.setdefault(t.replace(".", "_"), set()).add(t)
    broker_ids = sorted(live_brokers(zk))
    out: dict[str, ApiError | None] = {}
    planned: dict[str, TopicAssignment] = {}
    for topic in dict.fromkeys(topics):
        try:
            _check_new(topic, existing, deleting, by_collision_key)
            planned[topic] = drawn_assignment(broker_ids, partitions, replication_factor, rng)
        except ApiError as exc:
            out[topic] = exc
            continue
        existing.add(topic)
        by_collision_key.setdefault(topic.replace(".", "_"), set()).add(topic)
    if planned:
        out.update(_write(zk, planned))
    return out


def _check_new(
    topic: str, existing: set[str], deleting: set[str], by_collision_key: dict[str, set[str]]
) -> None:
    """AdminZkClient.validateTopicCreate for a topic without overrides, against the batch's
    one read of ZooKeeper."""
    validate_topic_name(topic)
    if topic in deleting:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' is marked for deletion.")
    if topic in existing:
        raise ApiError(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{topic}' already exists.")
    colliding = colliding_topics(topic, by_collision_key.get(topic.replace(".", "_"), ()))
    if colliding:
        raise ApiError(
            ErrorCode.INVALID_TOPIC_EXCEPTION,
            f"Topic '{topic}' collides with existing topics: {', '.join(colliding)}",
        )


def _write(zk: ZkStore, planned: dict[str, TopicAssignment]) -> dict[str, ApiError | None]:
    """Each topic's config then its assignment, up to MULTI_TOPICS topics a multi, the multis
    pipelined; a multi that fails (a name another creator took meanwhile) is undone whole, and
    its topics are written one at a time, as Kafka writes them, each with its own outcome."""
    configs_path = ConfigEntityZNode.path("topics", "-").rsplit("/", 1)[0]
    zk.ensure_paths([configs_path, TopicsZNode.path])
    # A config an earlier topic of the name left behind is overwritten (setOrCreateEntityConfigs).
    leftover = set(zk.children(configs_path))
    no_overrides = ConfigEntityZNode.encode({})
    chunks: list[list[str]] = []
    batches: list[list[WriteOp]] = []
    size = 0
    for topic, assignment in planned.items():
        ops = [
            WriteOp(ConfigEntityZNode.path("topics", topic), no_overrides, topic not in leftover),
            WriteOp(TopicZNode.path(topic), TopicZNode.encode(assignment)),
        ]
        cost = sum(len(op.path) + len(op.data) for op in ops)
        if not chunks or len(chunks[-1]) == MULTI_TOPICS or size + cost > MULTI_BYTES:
            chunks.append([])
            batches.append([])
            size = 0
        chunks[-1].append(topic)
        batches[-1] += ops
        size += cost
    out: dict[str, ApiError | None] = {}
    for chunk, failure in zip(chunks, zk.multi_many(batches), strict=True):
        for topic in chunk:
            out[topic] = None if failure is None else _write_alone(zk, topic, planned[topic])
    return out


def _write_alone(zk: ZkStore, topic: str, assignment: TopicAssignment) -> ApiError | None:
    try:
        write_new_topic(zk, topic, assignment, {})
    except ApiError as exc:
        return exc
    return None
