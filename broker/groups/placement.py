"""Which broker coordinates a group. Kafka puts a group on the leader of partition
abs(groupId.hashCode) % 50 of __consumer_offsets; minibroker keeps no such topic (committed
offsets live in ZooKeeper, as Kafka 0.8's did), so the same hash picks among the live brokers
that have the listener, in id order. Pure."""

from __future__ import annotations

from collections.abc import Iterable


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> Iterable[int]:
    data = s.encode("utf-16-be")
    return (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


def coordinator_for(group_id: str, live_broker_ids: Iterable[int]) -> int | None:
    """The coordinating broker of `group_id`, or None when no broker is live."""
    ids = sorted(live_broker_ids)
    if not ids:
        return None
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself.
    h = java_string_hash(group_id)
    return ids[(0 if h == -(1 << 31) else abs(h)) % len(ids)]
