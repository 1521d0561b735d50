"""Topics created on first use (`auto.create.topics.enable`, true in Kafka 2.6): a Metadata
request that names an unknown topic and allows it (v4+'s allow_auto_topic_creation; always
before v4) creates it with `num.partitions` and `default.replication.factor`, as Kafka's
KafkaApis.getTopicMetadata does, and is answered LEADER_NOT_AVAILABLE until its leaders exist."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterable

from broker.replica_manager import ReplicaManager
from minibroker.client import auto_create_zk
from minibroker.core.errors import ErrorCode
from minibroker.core.types import INTERNAL_TOPICS
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_errors import ZkError

_rng = random.Random()


async def maybe_create(
    rm: ReplicaManager, topics: Iterable[str], allowed: bool
) -> dict[str, ErrorCode]:
    """The error to answer for each topic this broker's metadata does not know:
    LEADER_NOT_AVAILABLE once created (or being created), UNKNOWN_TOPIC_OR_PARTITION when
    creation is not allowed, or the creation's own error (INVALID_TOPIC_EXCEPTION,
    INVALID_REPLICATION_FACTOR, ...). Kafka answers after its ZooKeeper writes, not after the
    controller has elected leaders; the batch's writes run in one thread off the loop, so the
    broker serves everything else meanwhile."""
    known = set(rm.metadata.topics())
    out: dict[str, ErrorCode] = {}
    enabled = allowed and rm.settings.get_bool("auto.create.topics.enable")
    wanted = []
    for topic in topics:
        if topic in known:
            continue
        if not enabled or topic in INTERNAL_TOPICS:  # internal ones: their coordinator's
            out[topic] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        else:
            wanted.append(topic)
    if not wanted:
        return out
    partitions = rm.settings.get_int("num.partitions")
    replication = rm.settings.get_int("default.replication.factor")
    try:
        results = await asyncio.to_thread(
            auto_create_zk.create_topics, rm.store, wanted, partitions, replication, _rng
        )
    except ZkError:
        # Some may be created: the client asks again, and finds them or creates the rest.
        return out | dict.fromkeys(wanted, ErrorCode.LEADER_NOT_AVAILABLE)
    for topic, error in results.items():
        if error is None:
            slog.event(
                "topic_auto_created", topic=topic, partitions=partitions,
                replication_factor=replication,
            )  # fmt: skip
            out[topic] = ErrorCode.LEADER_NOT_AVAILABLE
        elif error.code is ErrorCode.TOPIC_ALREADY_EXISTS:  # possibly another broker's doing
            out[topic] = ErrorCode.LEADER_NOT_AVAILABLE
        else:
            out[topic] = error.code
    return out
