"""Committed offsets of consumer groups in ZooKeeper (zk_layout.ConsumerOffsetZNode): written
and read in pipelined batches, in a worker thread (kazoo's calls block)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ConsumerOffsetZNode, ZNodeFormatError
from minibroker.runtime.zk_errors import ZkError, ZkNodeExists, ZkNoNode
from minibroker.runtime.zk_store import ZkStore

NO_OFFSET = -1


class OffsetStore:
    def __init__(self, store: ZkStore) -> None:
        self._store = store

    async def commit(self, group_id: str, offsets: Mapping[TopicPartition, int]) -> None:
        """Write every offset (creating its znode the first time); raises ZkError."""
        await asyncio.to_thread(self._commit, group_id, dict(offsets))

    def _commit(self, group_id: str, offsets: dict[TopicPartition, int]) -> None:
        paths = {ConsumerOffsetZNode.path(group_id, tp): o for tp, o in offsets.items()}
        existing = self._store.get_many(paths)
        for path, offset in paths.items():
            data = ConsumerOffsetZNode.encode(offset)
            if existing.get(path) is not None:
                self._store.set(path, data)
                continue
            try:
                self._store.create(path, data, makepath=True)
            except ZkNodeExists:
                self._store.set(path, data)

    async def fetch(
        self, group_id: str, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, int]:
        """The committed offset of each partition (-1: none); every partition the group
        committed when `tps` is None."""
        return await asyncio.to_thread(self._fetch, group_id, None if tps is None else list(tps))

    def _fetch(self, group_id: str, tps: list[TopicPartition] | None) -> dict[TopicPartition, int]:
        if tps is None:
            tps = self._committed_partitions(group_id)
        paths = {ConsumerOffsetZNode.path(group_id, tp): tp for tp in tps}
        got = self._store.get_many(paths)
        out = {}
        for path, tp in paths.items():
            found = got.get(path)
            try:
                out[tp] = NO_OFFSET if found is None else ConsumerOffsetZNode.decode(found[0])
            except ZNodeFormatError:
                out[tp] = NO_OFFSET
        return out

    def _committed_partitions(self, group_id: str) -> list[TopicPartition]:
        root = ConsumerOffsetZNode.group_offsets_path(group_id)
        out = []
        try:
            topics = self._store.children(root)
        except ZkNoNode:
            return []
        for topic in topics:
            try:
                parts = self._store.children(ConsumerOffsetZNode.topic_path(group_id, topic))
            except ZkError:
                continue
            out += [TopicPartition(topic, int(p)) for p in parts if p.isdigit()]
        return out
