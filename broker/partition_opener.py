"""Opening the partitions a broker is told to host: the log recovered from disk (its repairs
logged), the HW from the checkpoint, and the topic's configs from ZooKeeper (min.insync.replicas,
segment.bytes, max.message.bytes, the replication throttles)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from pathlib import Path

from broker.epoch_checkpoints import EpochCheckpointWriter
from broker.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT
from broker.log.file_pool import FilePool
from broker.log.layout import open_log
from broker.log_manager import load_checkpoint
from broker.partition_table import HostedPartition, PartitionTable
from broker.replication.partition import Partition
from broker.topic_configs import TopicConfigs
from minibroker.core.planted_bugs import PlantedBug
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ConfigEntityZNode
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkConnectionError, ZkStore

# How long a read done for a controller request waits for ZooKeeper to answer again.
ZK_READ_PATIENCE_MS = 10_000
# A segment holds at least one batch header (Kafka's minimum, 14, is a v0 record's overhead).
MIN_SEGMENT_BYTES = 61


def load_checkpointed_high_watermarks(log_dir: Path) -> dict[TopicPartition, int]:
    """The HW checkpoint of the log dir; an unreadable one is discarded with an event (every
    HW then starts at 0, clamped to its log, and is learned again from the leader)."""
    return load_checkpoint(
        log_dir,
        REPLICATION_OFFSET_CHECKPOINT,
        "high watermarks start at 0 and are learned again from the leaders",
    )


class PartitionOpener:
    def __init__(
        self,
        *,
        settings: Settings,
        broker_id: int,
        log_dir: Path,
        store: ZkStore,
        partitions: PartitionTable,
        checkpointed_hw: dict[TopicPartition, int],
        hw_moved: set[TopicPartition],
        checkpointed_start: dict[TopicPartition, int],
        checkpointed_clean: dict[TopicPartition, int],
        planted_bug: PlantedBug,
        now_ms: Callable[[], int],
        topic_configs: TopicConfigs,
    ) -> None:
        self.settings = settings
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.store = store
        self.partitions = partitions
        self.checkpointed_hw = checkpointed_hw
        self.hw_moved = hw_moved
        self.checkpointed_start = checkpointed_start
        self.checkpointed_clean = checkpointed_clean
        self.planted_bug = planted_bug
        self.now_ms = now_ms
        self.topic_configs = topic_configs
        self.lag_ms = settings.get_int("replica.lag.time.max.ms")
        # Every partition's segment files share these descriptors (10,000 partitions would
        # otherwise hold 20,000 open).
        self.file_pool = FilePool(settings.get_int("minibroker.log.max.open.files"))
        self.epoch_writer = EpochCheckpointWriter()

    async def get_or_create(self, tp: TopicPartition) -> HostedPartition:
        """The hosted partition, its log opened (and recovered) on first use."""
        hosted = self.partitions.get(tp)
        if hosted is not None:
            return hosted
        log = await asyncio.to_thread(
            open_log,
            self.log_dir,
            tp,
            self.file_pool,
            log_start_offset=self.checkpointed_start.get(tp, 0),
            gap_horizon=self.checkpointed_clean.get(tp, 0),
            **log_options(self.topic_configs, tp.topic),
        )
        log.defer_epoch_writes(self.epoch_writer.changed)
        partition = Partition(
            tp,
            self.broker_id,
            self.lag_ms,
            self.topic_configs.min_insync_replicas(tp.topic),
            planted_bug=self.planted_bug,
            hw_moved=self.hw_moved,
        )
        partition.initialize_high_watermark(self.checkpointed_hw.get(tp, 0), log)
        hosted = HostedPartition(partition, log)
        self.partitions[tp] = hosted
        if log.repairs:
            slog.event("log_recovered", logging.WARNING, tp=str(tp), repairs=list(log.repairs))
        slog.event(
            "log_opened",
            tp=str(tp),
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            high_watermark=partition.high_watermark,
        )
        return hosted

    async def load_topic_configs(self, topics: set[str]) -> None:
        """Read /config/topics/<t> of each topic not known yet (change notifications keep the
        known ones current, broker.dynamic_config)."""
        missing = sorted(t for t in topics if not self.topic_configs.known(t))
        if not missing:
            return

        def read() -> dict[str, dict[str, str]]:
            got = self.store.get_many([ConfigEntityZNode.path("topics", t) for t in missing])
            out = {}
            for topic in missing:
                found = got.get(ConfigEntityZNode.path("topics", topic))
                out[topic] = ConfigEntityZNode.decode(found[0]) if found and found[0] else {}
            return out

        # Kafka's ZooKeeper client waits until it is connected again: so does this read, for a
        # while, rather than failing a LeaderAndIsr when a loaded machine drops the connection.
        deadline = self.now_ms() + ZK_READ_PATIENCE_MS
        while True:
            try:
                configs = await asyncio.to_thread(read)
                break
            except ZkConnectionError:
                if self.now_ms() >= deadline:
                    raise
                await asyncio.sleep(0.1)
        for topic, overrides in configs.items():
            if not self.topic_configs.known(topic):
                self.topic_configs.set(topic, overrides)


def log_options(configs: TopicConfigs, topic: str) -> dict[str, int]:
    """A log's sizes and roll time from its topic's effective configs."""
    return {
        "segment_bytes": max(MIN_SEGMENT_BYTES, configs.int_value(topic, "segment.bytes")),
        "max_batch_bytes": configs.int_value(topic, "max.message.bytes"),
        "segment_ms": configs.int_value(topic, "segment.ms"),
        "segment_jitter_ms": configs.int_value(topic, "segment.jitter.ms"),
    }
