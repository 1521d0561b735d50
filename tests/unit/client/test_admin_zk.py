"""Topic creation and the preferred-election request against an in-memory ZooKeeper: what is
written, in which order, and the Kafka errors (the real ZooKeeper is in the integration tests)."""

from __future__ import annotations

import json
import random

import pytest

from minibroker.client.admin_zk import (
    ElectionInProgress,
    create_topic,
    election_partitions,
    live_brokers,
    read_topic,
    request_preferred_replica_election,
)
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)
from minibroker.runtime.zk_store import ZkStore
from tests.unit.client.memory_zk import MemoryZk


@pytest.fixture
def mem() -> MemoryZk:
    return MemoryZk.with_brokers(1, 2, 3)


def zk(m: MemoryZk) -> ZkStore:
    return m.as_store()


def create(
    m: MemoryZk,
    topic: str = "t",
    partitions: int = 3,
    rf: int = 3,
    config: dict[str, str] | None = None,
) -> None:
    create_topic(zk(m), topic, partitions, rf, config or {}, random.Random(7))


def test_create_writes_config_first_then_the_assignment(mem: MemoryZk) -> None:
    create(mem, config={"min.insync.replicas": "2"})
    assert mem.writes == ["/config/topics/t", "/brokers/topics/t"]
    assert json.loads(mem.nodes["/config/topics/t"]) == {
        "version": 1,
        "config": {"min.insync.replicas": "2"},
    }
    assignment = TopicZNode.decode("t", mem.nodes["/brokers/topics/t"])
    assert sorted(assignment.partitions) == [0, 1, 2]
    assert all(sorted(r) == [1, 2, 3] for r in assignment.partitions.values())
    # Round-robin leaders: each broker is the preferred leader of one partition.
    assert sorted(r[0] for r in assignment.partitions.values()) == [1, 2, 3]


def test_create_writes_an_empty_config_too(mem: MemoryZk) -> None:
    create(mem, "u", 1, 1)
    assert json.loads(mem.nodes["/config/topics/u"]) == {"version": 1, "config": {}}


def test_a_leftover_config_is_overwritten(mem: MemoryZk) -> None:
    mem.create("/config/topics/t", b'{"version":1,"config":{"retention.ms":"5"}}')
    create(mem)
    assert json.loads(mem.nodes["/config/topics/t"])["config"] == {}


@pytest.mark.parametrize(
    ("topic", "partitions", "rf", "config", "code"),
    [
        ("t", 3, 4, {}, ErrorCode.INVALID_REPLICATION_FACTOR),
        ("t", 0, 1, {}, ErrorCode.INVALID_PARTITIONS),
        ("bad name", 1, 1, {}, ErrorCode.INVALID_TOPIC_EXCEPTION),
        ("t", 1, 1, {"flush.ms": "-1"}, ErrorCode.INVALID_CONFIG),
        ("t", 1, 1, {"no.such.config": "1"}, ErrorCode.INVALID_CONFIG),
    ],
)
def test_refused_creations_write_nothing(
    mem: MemoryZk, topic: str, partitions: int, rf: int, config: dict[str, str], code: ErrorCode
) -> None:
    with pytest.raises(ApiError) as err:
        create_topic(zk(mem), topic, partitions, rf, config, random.Random(1))
    assert err.value.code is code
    assert mem.writes == []


def test_existing_colliding_and_deleted_topics(mem: MemoryZk) -> None:
    create(mem, "a.b")
    with pytest.raises(ApiError, match="Topic 'a.b' already exists") as err:
        create(mem, "a.b")
    assert err.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
    with pytest.raises(ApiError, match="collides with existing topics: a.b") as err:
        create(mem, "a_b")
    assert err.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION
    mem.create("/admin/delete_topics/gone")
    with pytest.raises(ApiError, match="marked for deletion"):
        create(mem, "gone")


def test_the_random_draws_come_from_the_given_generator(mem: MemoryZk) -> None:
    create_topic(zk(mem), "x", 6, 2, {}, random.Random(3))
    other = MemoryZk()
    other.nodes = {k: v for k, v in mem.nodes.items() if "/x" not in k}
    create_topic(zk(other), "x", 6, 2, {}, random.Random(3))
    assert other.nodes["/brokers/topics/x"] == mem.nodes["/brokers/topics/x"]


def test_read_topic_joins_assignment_config_and_states(mem: MemoryZk) -> None:
    mem.create(TopicZNode.path("t"), TopicZNode.encode(TopicAssignment({0: (1, 2), 1: (2, 1)})))
    info = read_topic(zk(mem), "t")
    assert info is not None and info.config == {} and info.states == {}
    assert info.partitions_without_leader() == [0, 1]
    state = LeaderAndIsr(1, 0, (1, 2), 1)
    mem.create(
        TopicPartitionStateZNode.path(TopicPartition("t", 0)),
        TopicPartitionStateZNode.encode(state),
        makepath=True,
    )
    info = read_topic(zk(mem), "t")
    assert info is not None and info.states[0].isr == (1, 2)
    assert info.partitions_without_leader() == [1]
    assert read_topic(zk(mem), "nope") is None
    assert sorted(live_brokers(zk(mem))) == [1, 2, 3]


def test_preferred_election_request(mem: MemoryZk) -> None:
    create(mem, "b", 2, 1)
    create(mem, "a", 1, 1)
    every = election_partitions(zk(mem))
    assert every == [TopicPartition("a", 0), TopicPartition("b", 0), TopicPartition("b", 1)]
    assert election_partitions(zk(mem), "b", 1) == [TopicPartition("b", 1)]
    for topic, partition in (("zz", None), ("b", 5)):
        with pytest.raises(ApiError) as err:
            election_partitions(zk(mem), topic, partition)
        assert err.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    request_preferred_replica_election(zk(mem), reversed(every))
    assert json.loads(mem.nodes["/admin/preferred_replica_election"]) == {
        "version": 1,
        "partitions": [
            {"topic": "a", "partition": 0},
            {"topic": "b", "partition": 0},
            {"topic": "b", "partition": 1},
        ],
    }
    with pytest.raises(ElectionInProgress, match="already in progress"):
        request_preferred_replica_election(zk(mem), every)
