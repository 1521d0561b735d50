"""Where an acknowledged record was written: what a producer's send future resolves with."""

from __future__ import annotations

from typing import NamedTuple

from minibroker.core.types import TopicPartition


class RecordMetadata(NamedTuple):
    """Where an acknowledged record was written (offset -1 with acks=0: nobody said). A named
    tuple: one is made for every acknowledged record."""

    topic: str
    partition: int
    offset: int
    timestamp: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)
