"""A follower's Fetch request on the wire, from its session's plan (fetch_session_builder)."""

from __future__ import annotations

from broker.fetch.session_builder import FetchPlan
from minibroker.rpc import broker_pb2


def follower_fetch_request(
    plan: FetchPlan,
    *,
    replica_id: int,
    max_wait_ms: int,
    min_bytes: int,
    max_bytes: int,
    partition_max_bytes: int,
) -> broker_pb2.FetchRequest:
    """The partitions the plan sends, grouped by topic, and the ones it forgets."""
    request = broker_pb2.FetchRequest(
        replica_id=replica_id,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        session_id=plan.session_id,
        session_epoch=plan.epoch,
    )
    by_topic: dict[str, list[tuple[int, tuple[int, int, int]]]] = {}
    for tp, state in plan.send.items():
        by_topic.setdefault(tp.topic, []).append((tp.partition, state))
    for topic in sorted(by_topic):
        t = request.topics.add(topic=topic)
        for partition, (offset, log_start, epoch) in by_topic[topic]:
            t.partitions.add(
                partition=partition,
                current_leader_epoch=epoch,
                fetch_offset=offset,
                log_start_offset=log_start,
                partition_max_bytes=partition_max_bytes,
            )
    forgotten: dict[str, list[int]] = {}
    for tp in plan.forgotten:
        forgotten.setdefault(tp.topic, []).append(tp.partition)
    for topic, numbers in sorted(forgotten.items()):
        request.forgotten_topics_data.add(topic=topic, partitions=numbers)
    return request
