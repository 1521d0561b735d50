"""Many topics created at once, as a Metadata request's auto-creation makes them
(minibroker/client/auto_create_zk.py), against an in-memory ZooKeeper: the same znodes and
refusals as one AdminZkClient.createTopic per topic in turn (Kafka 2.6's KafkaApis.createTopic),
every config written before any assignment."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Sequence

from minibroker.client.admin_zk import create_topic
from minibroker.client.auto_create_zk import MULTI_TOPICS, create_topics
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.zk_layout import TopicZNode
from minibroker.runtime.zk_client import WriteOp
from minibroker.runtime.zk_store import ZkError
from tests.unit.client.memory_zk import MemoryZk


def codes(results: dict[str, ApiError | None]) -> dict[str, ErrorCode | None]:
    return {t: None if e is None else e.code for t, e in results.items()}


def test_the_batch_writes_what_one_creation_each_would_write() -> None:
    one_each, batch = MemoryZk.with_brokers(1, 2, 3), MemoryZk.with_brokers(1, 2, 3)
    names = [f"t{i}" for i in range(20)]
    rng = random.Random(5)
    for t in names:
        create_topic(one_each.as_store(), t, 2, 2, {}, rng)
    got = create_topics(batch.as_store(), names, 2, 2, random.Random(5))
    assert got == dict.fromkeys(names)
    assert batch.nodes == one_each.nodes
    # Each topic's config before its assignment (in one multi with it).
    assert batch.writes == [
        path for t in names for path in (f"/config/topics/{t}", f"/brokers/topics/{t}")
    ]
    assignment = TopicZNode.decode("t0", batch.nodes["/brokers/topics/t0"]).partitions
    assert sorted(assignment) == [0, 1] and all(len(r) == 2 for r in assignment.values())


def test_refusals_are_per_topic_and_the_rest_is_created() -> None:
    mem = MemoryZk.with_brokers(1, 2, 3)
    create_topic(mem.as_store(), "old", 1, 1, {}, random.Random(1))
    mem.create("/admin/delete_topics/going")
    mem.create("/config/topics/reused", json.dumps({"version": 1, "config": {"x": "1"}}).encode())
    got = create_topics(
        mem.as_store(),
        ["old", "going", "bad/name", "a.b", "a_b", "new", "new", "reused"],
        1,
        1,
        random.Random(2),
    )
    assert codes(got) == {
        "old": ErrorCode.TOPIC_ALREADY_EXISTS,
        "going": ErrorCode.TOPIC_ALREADY_EXISTS,
        "bad/name": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "a.b": None,
        # Created in turn, "a_b" collides with the "a.b" created just before it.
        "a_b": ErrorCode.INVALID_TOPIC_EXCEPTION,
        "new": None,
        "reused": None,
    }
    assert "/brokers/topics/a_b" not in mem.nodes and "/brokers/topics/new" in mem.nodes
    # A config left by an earlier topic of the name is overwritten (setOrCreateEntityConfigs).
    assert json.loads(mem.nodes["/config/topics/reused"])["config"] == {}


def test_too_few_brokers_is_each_topics_invalid_replication_factor() -> None:
    mem = MemoryZk.with_brokers(1)
    got = create_topics(mem.as_store(), ["x", "y"], 1, 3, random.Random(0))
    assert codes(got) == dict.fromkeys(["x", "y"], ErrorCode.INVALID_REPLICATION_FACTOR)
    assert mem.writes == []


class RivalBroker(MemoryZk):
    """Another broker creates "raced" between this batch's read and its writes."""

    def multi_many(self, batches: Iterable[Sequence[WriteOp]]) -> list[ZkError | None]:
        self.create("/brokers/topics/raced", b"{}")
        return super().multi_many(batches)


def test_a_topic_another_broker_created_meanwhile_already_exists() -> None:
    """The multi holding "raced" fails whole; its topics are then written one at a time."""
    mem = RivalBroker.with_brokers(1, 2)
    got = create_topics(mem.as_store(), ["calm", "raced", "after"], 1, 1, random.Random(0))
    assert codes(got) == {"calm": None, "raced": ErrorCode.TOPIC_ALREADY_EXISTS, "after": None}
    assert {"/brokers/topics/calm", "/brokers/topics/after"} <= set(mem.nodes)


def test_a_batch_is_split_into_multis_of_bounded_size() -> None:
    sizes: list[int] = []

    class Counting(MemoryZk):
        def multi_many(self, batches: Iterable[Sequence[WriteOp]]) -> list[ZkError | None]:
            batches = list(batches)
            sizes.extend(len(b) for b in batches)
            return super().multi_many(batches)

    mem = Counting.with_brokers(1, 2, 3)
    got = create_topics(mem.as_store(), [f"t{i}" for i in range(120)], 1, 1, random.Random(0))
    assert set(got.values()) == {None}
    assert sizes == [2 * MULTI_TOPICS, 2 * MULTI_TOPICS, 2 * 20]
    sizes.clear()
    wide = create_topics(mem.as_store(), ["w0", "w1", "w2"], 10_000, 3, random.Random(0))
    assert set(wide.values()) == {None}
    assert sizes == [2, 2, 2]  # each ~150 KB assignment in a multi of its own
