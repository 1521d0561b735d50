"""Changes to existing topics through ZooKeeper (minibroker.client.topic_changes_zk and
config_zk) against an in-memory ZooKeeper: the znodes Kafka 2.6's AdminZkClient writes and its
errors (AddPartitionsTest, DeleteTopicTest.testDeleteNonExistingTopic, AdminZkClientTest
.testChangeTopicConfig / testChangeBrokerConfig)."""

from __future__ import annotations

import json
import random

import pytest

from minibroker.client import config_zk
from minibroker.client.admin_zk import create_topic
from minibroker.client.topic_changes_zk import (
    add_partitions,
    mark_for_deletion,
    proposal,
    request_reassignment,
)
from minibroker.core.errors import AdminOperationError, ApiError, ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import TopicAssignment, TopicZNode
from minibroker.runtime.properties import PROPERTY_BY_NAME
from tests.unit.client.memory_zk import MemoryZk


@pytest.fixture
def mem() -> MemoryZk:
    m = MemoryZk.with_brokers(1, 2, 3)
    create_topic(m.as_store(), "t", 2, 2, {}, random.Random(7), replica_assignment={
        0: [1, 2], 1: [2, 3]})  # fmt: skip
    m.writes.clear()
    return m


def assignment(m: MemoryZk, topic: str = "t") -> TopicAssignment:
    return TopicZNode.decode(topic, m.nodes[TopicZNode.path(topic)])


def test_added_partitions_rewrite_the_whole_topic_znode(mem: MemoryZk) -> None:
    added = add_partitions(mem.as_store(), "t", 4)
    assert sorted(added) == [2, 3]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    whole = assignment(mem)
    assert whole.partitions == {0: (1, 2), 1: (2, 3), **added}
    assert mem.writes == ["/brokers/topics/t"]
    assert json.loads(mem.nodes["/brokers/topics/t"])["version"] == 2


@pytest.mark.parametrize(
    ("total", "given", "code", "text"),
    [
        (2, None, ErrorCode.INVALID_PARTITIONS, "Topic already has 2 partitions."),
        (1, None, ErrorCode.INVALID_PARTITIONS, "which is higher than the requested 1"),
        (3, [[1, 9]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Unknown broker(s)"),
        (4, [[1, 2]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "by 2 but 1 assignments"),
        (3, [[1, 1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Duplicate brokers"),
        (3, [[1]], ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Inconsistent replication factor"),
    ],
)
def test_refused_partition_additions_write_nothing(
    mem: MemoryZk, total: int, given: list[list[int]] | None, code: ErrorCode, text: str
) -> None:
    with pytest.raises(ApiError) as err:
        add_partitions(mem.as_store(), "t", total, given)
    assert err.value.code is code and text in err.value.message
    assert mem.writes == []


def test_no_partitions_are_added_during_a_reassignment(mem: MemoryZk) -> None:
    moving = TopicAssignment({0: (3, 1, 2), 1: (2, 3)}, {0: (3,)}, {0: (2,)})
    mem.set(TopicZNode.path("t"), TopicZNode.encode(moving))
    with pytest.raises(ApiError) as err:
        add_partitions(mem.as_store(), "t", 3)
    assert err.value.code is ErrorCode.REASSIGNMENT_IN_PROGRESS


def test_marking_for_deletion_is_idempotent_and_needs_the_topic(mem: MemoryZk) -> None:
    assert mark_for_deletion(mem.as_store(), "t") is True
    assert mark_for_deletion(mem.as_store(), "t") is False
    assert "/admin/delete_topics/t" in mem.nodes
    with pytest.raises(ApiError) as err:
        mark_for_deletion(mem.as_store(), "nope")
    assert err.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_the_legacy_reassignment_znode_is_kafkas_json(mem: MemoryZk) -> None:
    request_reassignment(mem.as_store(), {TopicPartition("t", 0): [3, 1]})
    assert json.loads(mem.nodes["/admin/reassign_partitions"]) == {
        "version": 1,
        "partitions": [{"topic": "t", "partition": 0, "replicas": [3, 1]}],
    }
    with pytest.raises(ApiError) as err:
        request_reassignment(mem.as_store(), {TopicPartition("t", 1): [1, 2]})
    assert err.value.code is ErrorCode.REASSIGNMENT_IN_PROGRESS


def test_a_generated_proposal_keeps_the_replication_factor() -> None:
    current = {TopicPartition("t", p): (1, 2) for p in range(6)}
    got = proposal(current, [3, 4, 5], random.Random(1))
    assert sorted(got) == sorted(current)
    assert all(len(r) == 2 and set(r) <= {3, 4, 5} for r in got.values())


def test_config_changes_write_the_entity_then_a_notification(mem: MemoryZk) -> None:
    store = mem.as_store()
    config_zk.change_topic_config(store, "t", {"retention.ms": "100"})
    config_zk.change_broker_config(store, None, {"log.retention.ms": "5"}, PROPERTY_BY_NAME)
    config_zk.change_broker_config(store, 2, {"follower.replication.throttled.rate": "7"},
                                   PROPERTY_BY_NAME)  # fmt: skip
    assert json.loads(mem.nodes["/config/topics/t"]) == {
        "version": 1, "config": {"retention.ms": "100"}}  # fmt: skip
    assert "/config/brokers/<default>" in mem.nodes and "/config/brokers/2" in mem.nodes
    notes = sorted(p for p in mem.nodes if p.startswith("/config/changes/config_change_"))
    assert [json.loads(mem.nodes[p]) for p in notes] == [
        {"version": 2, "entity_path": "topics/t"},
        {"version": 2, "entity_path": "brokers/<default>"},
        {"version": 2, "entity_path": "brokers/2"},
    ]
    # Kafka 2.6's AdminZkClient.validateTopicConfig (core/src/main/scala/kafka/zk/
    # AdminZkClient.scala): AdminOperationException, answered UNKNOWN_SERVER_ERROR by a broker
    # (DynamicConfigChangeTest.testConfigChangeOnNonExistingTopic; KAFKA-10033 in 2.7 made it
    # UnknownTopicOrPartitionException). Topic.validate comes first: an illegal name.
    with pytest.raises(AdminOperationError) as err:
        config_zk.change_topic_config(store, "nope", {})
    assert err.value.code is ErrorCode.UNKNOWN_SERVER_ERROR
    assert str(err.value) == 'Topic "nope" does not exist.'
    with pytest.raises(ApiError) as bad_name:
        config_zk.change_topic_config(store, "no/pe", {})
    assert bad_name.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
