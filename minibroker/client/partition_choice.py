"""Which partition a record sent without one goes to, for the producer: murmur2 of its key, or
the topic's sticky partition (KIP-480), kept until its open batch has no room for the record."""

from __future__ import annotations

import random
from typing import Generic, TypeVar

from minibroker.client.accumulator import RecordAccumulator
from minibroker.client.errors import ProduceError
from minibroker.client.metadata import ClusterMetadata
from minibroker.core.errors import ErrorCode
from minibroker.core.partitioner import StickyPartition, next_sticky_partition, partition_for
from minibroker.core.types import TopicPartition

H = TypeVar("H")


class PartitionChooser(Generic[H]):
    def __init__(
        self, seeds: random.Random, acc: RecordAccumulator[H], cache: ClusterMetadata
    ) -> None:
        self._seeds = seeds
        self._acc = acc
        self._cache = cache
        self._sticky: dict[str, StickyPartition] = {}
        # Each topic's sticky partition as a TopicPartition: the common case in one look-up.
        self._current: dict[str, TopicPartition] = {}
        self._tps: dict[str, list[TopicPartition]] = {}

    def choose(
        self, topic: str, n: int, key: bytes | None, partition: int | None, size: int
    ) -> TopicPartition:
        """The partition of a record of `size` bytes in a topic of `n` partitions; raises
        ProduceError for a partition the topic does not have."""
        if partition is not None:
            if not 0 <= partition < n:
                raise ProduceError(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                    f"topic {topic!r} has no partition {partition} ({n} partitions)",
                )
            return self._tp(topic, partition, n)
        if key is None:
            current = self._current.get(topic)
            if (
                current is not None
                and current.partition < n
                and not self._acc.starts_new_batch(current, size)
            ):
                return current
        sticky = self._sticky.get(topic)
        if sticky is None:
            sticky = self._sticky[topic] = StickyPartition(cursor=self._seeds.randrange(1 << 16))
        chosen = partition_for(key, n, sticky)
        if key is None and self._acc.starts_new_batch(self._tp(topic, chosen, n), size):
            # Once per batch, not per record: move on to a partition that has a leader.
            available = self._cache.available_partitions(topic)
            chosen = next_sticky_partition(sticky, n, available)
        tp = self._tp(topic, chosen, n)
        if key is None:
            self._current[topic] = tp
        return tp

    def _tp(self, topic: str, partition: int, count: int) -> TopicPartition:
        """The topic's TopicPartition objects, made once (not once per record)."""
        tps = self._tps.get(topic)
        if tps is None or len(tps) != count:
            tps = self._tps[topic] = [TopicPartition(topic, i) for i in range(count)]
        return tps[partition]
