"""Which broker coordinates a group. Kafka puts a group on the leader of partition
abs(groupId.hashCode) % 50 of __consumer_offsets; minibroker keeps no such topic (committed
offsets live in ZooKeeper, as Kafka 0.8's did), so the same hash picks among the live brokers
that have the listener, in id order. Pure."""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.core.coordinator_log.partitioning import java_string_hash, kafka_abs


def coordinator_for(group_id: str, live_broker_ids: Iterable[int]) -> int | None:
    """The coordinating broker of `group_id`, or None when no broker is live."""
    ids = sorted(live_broker_ids)
    if not ids:
        return None
    return ids[kafka_abs(java_string_hash(group_id)) % len(ids)]
