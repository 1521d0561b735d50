"""One follower fetcher per leader broker; partitions move between them on LeaderAndIsr."""

from __future__ import annotations

import asyncio

from broker.fetch.fetcher import FollowerFetcher
from broker.partition_table import FetcherServices, PartitionTable
from minibroker.core.types import TopicPartition


class FetcherManager:
    """One fetcher per leader broker; partitions move between them on LeaderAndIsr."""

    def __init__(self, partitions: PartitionTable, services: FetcherServices) -> None:
        self.partitions = partitions
        self.services = services
        self.fetchers: dict[int, FollowerFetcher] = {}
        self._stopping: set[asyncio.Future[None]] = set()
        self._full_fetches_retired = 0

    def add_partition(
        self, leader_id: int, address: str, tp: TopicPartition, offset: int, epoch: int
    ) -> None:
        """Follow `tp` from `leader_id` at `address` (its inter-broker listener)."""
        fetcher = self.fetchers.get(leader_id)
        if fetcher is not None and fetcher.address != address:
            self._stop_later(self.fetchers.pop(leader_id))
            fetcher = None
        if fetcher is None:
            fetcher = FollowerFetcher(self.partitions, self.services, leader_id, address)
            self.fetchers[leader_id] = fetcher
        fetcher.add(tp, offset, epoch)

    def remove_partitions(self, tps: list[TopicPartition]) -> None:
        for leader_id, fetcher in list(self.fetchers.items()):
            for tp in tps:
                fetcher.remove(tp)
            if not fetcher.states:
                self._stop_later(self.fetchers.pop(leader_id))

    def full_fetches(self) -> int:
        """Requests naming every partition, since start (sessions opened or lost)."""
        return self._full_fetches_retired + sum(
            f.session.full_fetches for f in self.fetchers.values()
        )

    def _stop_later(self, fetcher: FollowerFetcher) -> None:
        self._full_fetches_retired += fetcher.session.full_fetches
        task = asyncio.ensure_future(fetcher.stop())
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def stop(self) -> None:
        for fetcher in list(self.fetchers.values()):
            await fetcher.stop()
        self.fetchers.clear()
