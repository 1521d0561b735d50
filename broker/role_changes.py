"""A hosted partition becoming leader or follower on LeaderAndIsr (reference §2.8, §2.9): the
fetchers told, the partition's rules applied, one event each."""

from __future__ import annotations

from collections.abc import Callable

from broker.fetch.fetcher_manager import FetcherManager
from broker.metadata_cache import MetadataCache
from broker.partition_table import HostedPartition
from broker.types import LeaderAndIsrPartition
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog


def make_leader(
    hosted: HostedPartition, item: LeaderAndIsrPartition, fetchers: FetcherManager, now_ms: int
) -> None:
    """Reference §2.8: stop following, become leader at the new epoch."""
    fetchers.remove_partitions([item.tp])
    was = hosted.partition.leader_id
    hosted.partition.make_leader(item.state, hosted.log, now_ms)
    slog.event(
        "became_leader",
        tp=str(item.tp),
        leader_epoch=item.state.leader_epoch,
        isr=list(item.state.isr),
        previous_leader=was,
        epoch_start_offset=hosted.partition.leader_epoch_start_offset,
        high_watermark=hosted.partition.high_watermark,
    )


def make_follower(
    hosted: HostedPartition,
    item: LeaderAndIsrPartition,
    fetchers: FetcherManager,
    metadata: MetadataCache,
    on_partition_changed: Callable[[TopicPartition], None],
) -> None:
    """Reference §2.9: follow the new leader from the local HW (KAFKA-7164), unless the
    leader is not alive (then only the log is kept, pitfall 17)."""
    leader = item.state.leader
    if not metadata.is_alive(leader):
        # Kafka skips it and only keeps the log (pitfall 17): the controller sends
        # UpdateMetadata first, so this means the leader is gone again or none exists.
        slog.event("follower_skipped", tp=str(item.tp), leader=leader, reason="leader_not_alive")
        return
    fetchers.remove_partitions([item.tp])
    hosted.partition.make_follower(item.state)
    on_partition_changed(item.tp)  # waiting produces answer NOT_LEADER_OR_FOLLOWER
    # Every epoch change starts with truncation (KAFKA-7164), from the local HW.
    fetchers.add_partition(
        leader,
        metadata.brokers[leader].address,
        item.tp,
        hosted.partition.high_watermark,
        item.state.leader_epoch,
    )
    slog.event(
        "became_follower",
        tp=str(item.tp),
        leader=leader,
        leader_epoch=item.state.leader_epoch,
        high_watermark=hosted.partition.high_watermark,
        log_end_offset=hosted.log.log_end_offset,
    )
