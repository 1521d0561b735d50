"""The partitions a broker hosts, and the few services its follower fetchers and ISR tasks use.
They lean on these narrow pieces, never on the replica manager that owns them (as Kafka's
Partition is built from a PartitionStateStore and DelayedOperations, not from the manager)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from broker.log.log import Log
from broker.metrics import BrokerMetrics
from broker.replication.partition import Partition
from minibroker.core.planted_bugs import PlantedBug
from minibroker.core.types import TopicPartition
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore


@dataclass
class HostedPartition:
    """A hosted partition: its replication state and its log."""

    partition: Partition
    log: Log

    def append_as_follower(self, records: bytes, leader_high_watermark: int) -> tuple[int, int]:
        """A follower's fetch answer in one step: append the leader's batches (if any), then
        take the leader's HW (follower HW = min(LEO, leader HW), reference §2.9). Returns the
        HW before and after. RecordError leaves log and HW unchanged."""
        if records:
            self.log.append_as_follower(records)
        before = self.partition.high_watermark
        self.partition.update_follower_high_watermark(leader_high_watermark, self.log)
        return before, self.partition.high_watermark


# The broker's table of hosted partitions: one dict, owned by the replica manager, read by the
# fetchers and ISR tasks (all on the one event loop).
PartitionTable = dict[TopicPartition, HostedPartition]


@dataclass(frozen=True)
class FetcherServices:
    """What a follower fetcher needs besides the partition table."""

    broker_id: int
    settings: Settings
    planted_bug: PlantedBug
    now_ms: Callable[[], int]
    # The follower's replication throttle (KIP-73): whether to leave a partition out of the
    # next fetch (given whether it is caught up), and the bytes fetched of each partition.
    follower_throttles: Callable[[TopicPartition, bool], bool] = lambda _tp, _in_sync: False
    record_fetched: Callable[[TopicPartition, int], None] = lambda _tp, _n: None


@dataclass(frozen=True)
class IsrTaskServices:
    """What the periodic ISR, propagation and checkpoint tasks need besides the table."""

    settings: Settings
    metrics: BrokerMetrics
    store: ZkStore
    log_dir: Path
    now_ms: Callable[[], int]
    first_leader_and_isr: asyncio.Event
    # HWs read at start-up for partitions not hosted (yet); shared with the replica manager.
    checkpointed_hw: dict[TopicPartition, int]
    # Partitions whose HW moved since the last checkpoint (every Partition adds itself).
    hw_moved: set[TopicPartition]
    on_partition_changed: Callable[[TopicPartition], None]
