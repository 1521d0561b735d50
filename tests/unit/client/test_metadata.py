"""The client's metadata cache, from constructed Metadata responses: leaders, epochs that never
go backwards, invalidation, unknown topics, and the order brokers are asked in."""

from __future__ import annotations

from typing import Any

from minibroker.client.metadata import (
    BrokerNode,
    ClusterMetadata,
    parse_metadata_response,
    refresh_candidates,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def response(
    leaders: dict[int, tuple[int, int]],
    brokers: tuple[int, ...] = (1, 2, 3),
    topic: str = "t",
    topic_error: ErrorCode = ErrorCode.NONE,
) -> Any:
    """A MetadataResponse for one topic: partition -> (leader, leader_epoch)."""
    resp = broker_pb2.MetadataResponse(controller_id=brokers[0] if brokers else -1)
    for b in brokers:
        resp.brokers.add(node_id=b, host="127.0.0.1", port=9090 + b)
    t = resp.topics.add(name=topic, error_code=topic_error)
    for p, (leader, epoch) in leaders.items():
        t.partitions.add(
            partition_index=p,
            leader_id=leader,
            leader_epoch=epoch,
            replica_nodes=[1, 2, 3],
            isr_nodes=[1, 2] if leader >= 0 else [],
            offline_replicas=[3],
            error_code=ErrorCode.NONE if leader >= 0 else ErrorCode.LEADER_NOT_AVAILABLE,
        )
    return resp


def leader_id(cache: ClusterMetadata, tp: TopicPartition) -> int | None:
    node = cache.leader_for(tp)
    return None if node is None else node.node_id


def cache_of(resp: Any, now_ms: int = 0) -> ClusterMetadata:
    cache = ClusterMetadata()
    cache.update(parse_metadata_response(resp), now_ms)
    return cache


def test_parse_keeps_every_field() -> None:
    snap = parse_metadata_response(response({0: (2, 5), 1: (-1, 3)}))
    assert snap.controller_id == 1
    assert snap.brokers[1] == BrokerNode(2, "127.0.0.1", 9092)
    (topic,) = snap.topics
    p0, p1 = topic.partitions
    assert (p0.tp, p0.leader, p0.leader_epoch) == (TP0, 2, 5)
    assert (p0.replicas, p0.isr, p0.offline_replicas) == ((1, 2, 3), (1, 2), (3,))
    assert p1.error is ErrorCode.LEADER_NOT_AVAILABLE


def test_leader_for_and_partitions() -> None:
    cache = cache_of(response({0: (2, 5), 1: (-1, 3)}), now_ms=10)
    assert cache.leader_for(TP0) == BrokerNode(2, "127.0.0.1", 9092)
    assert cache.leader_for(TP1) is None
    assert cache.leader_epoch(TP0) == 5
    assert cache.partitions_for("t") == [0, 1]
    assert cache.available_partitions("t") == [0]
    assert cache.partitions_for("other") is None
    assert cache.age_ms(25) == 15


def test_a_leader_that_is_not_a_live_broker_is_no_leader() -> None:
    cache = cache_of(response({0: (3, 1)}, brokers=(1, 2)))
    assert cache.leader_for(TP0) is None
    assert cache.available_partitions("t") == []


def test_an_answer_with_an_older_epoch_does_not_bring_an_old_leader_back() -> None:
    cache = cache_of(response({0: (2, 5), 1: (1, 1)}))
    cache.update(parse_metadata_response(response({0: (1, 4), 1: (3, 2)})), 1)
    assert leader_id(cache, TP0) == 2
    assert leader_id(cache, TP1) == 3
    cache.update(parse_metadata_response(response({0: (3, 5)})), 2)
    assert leader_id(cache, TP0) == 3


def test_invalidate_forgets_the_leader_but_keeps_the_epoch() -> None:
    cache = cache_of(response({0: (2, 5)}))
    cache.invalidate(TP0)
    assert cache.leader_for(TP0) is None
    assert cache.leader_epoch(TP0) == 5
    cache.update(parse_metadata_response(response({0: (1, 4)})), 1)  # stale answer
    assert cache.leader_for(TP0) is None
    cache.update(parse_metadata_response(response({0: (2, 5)})), 2)  # same epoch: accepted
    assert leader_id(cache, TP0) == 2
    cache.invalidate(TopicPartition("nope", 0))  # unknown partitions are ignored


def test_unknown_topic_is_recorded_and_drops_what_we_knew() -> None:
    cache = cache_of(response({0: (2, 5)}))
    cache.update(
        parse_metadata_response(response({}, topic_error=ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)), 1
    )
    assert cache.partitions_for("t") is None
    assert cache.topic_error("t") is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    cache.update(parse_metadata_response(response({0: (1, 0)})), 2)
    assert cache.topic_error("t") is None and cache.partitions_for("t") == [0]


def test_topics_not_in_an_answer_keep_their_metadata_and_brokers_are_replaced() -> None:
    cache = cache_of(response({0: (2, 5)}))
    cache.update(parse_metadata_response(response({0: (1, 0)}, brokers=(1,), topic="u")), 1)
    assert cache.partitions_for("t") == [0]
    assert list(cache.brokers) == [1]
    assert cache.leader_for(TP0) is None  # broker 2 is gone


def test_ipv6_broker_address_is_bracketed() -> None:
    assert BrokerNode(1, "::1", 9092).address == "[::1]:9092"


def test_refresh_candidates_ask_healthy_idle_brokers_first_then_oldest_failures() -> None:
    order = refresh_candidates(
        ["b1:1", "b2:2", "b3:3", "b4:4"],
        ["boot:9", "b1:1"],
        failed_ms={"b1:1": 50, "b2:2": 10},
        in_flight={"b3:3": 1},
    )
    assert order == ["b4:4", "boot:9", "b3:3", "b2:2", "b1:1"]
    assert refresh_candidates([], ["boot:9"], {}, {}) == ["boot:9"]
