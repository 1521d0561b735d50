"""Committed offsets earlier minibroker versions kept in ZooKeeper (zk_layout.ConsumerOffsetZNode,
Kafka 0.8's layout), each with its metadata string: read in pipelined batches in a worker thread
(kazoo's calls block), once, by the coordinator that moves them into __consumer_offsets
(group_migration.py), which then removes them."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ConsumerOffsetZNode, ZNodeFormatError
from minibroker.runtime.zk_errors import ZkError, ZkNoNode
from minibroker.runtime.zk_store import ZkStore

NO_OFFSET = -1
Committed = tuple[int, str]  # (offset, metadata)


class ZkOffsets:
    def __init__(self, store: ZkStore) -> None:
        self._store = store

    async def fetch(
        self, group_id: str, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, Committed]:
        """The committed (offset, metadata) of each partition ((-1, ""): none); every partition
        the group committed when `tps` is None."""
        return await asyncio.to_thread(self._fetch, group_id, None if tps is None else list(tps))

    def _fetch(
        self, group_id: str, tps: list[TopicPartition] | None
    ) -> dict[TopicPartition, Committed]:
        if tps is None:
            tps = self._committed_partitions(group_id)
        paths = {ConsumerOffsetZNode.path(group_id, tp): tp for tp in tps}
        got = self._store.get_many(paths)
        out = {}
        for path, tp in paths.items():
            found = got.get(path)
            try:
                out[tp] = (
                    (NO_OFFSET, "")
                    if found is None
                    else ConsumerOffsetZNode.decode_with_metadata(found[0])
                )
            except ZNodeFormatError:
                out[tp] = (NO_OFFSET, "")
        return out

    async def groups(self) -> list[str]:
        """Every group with committed offsets."""
        return await asyncio.to_thread(self._groups)

    def _groups(self) -> list[str]:
        try:
            groups = self._store.children(ConsumerOffsetZNode.root)
        except ZkNoNode:
            return []
        paths = {ConsumerOffsetZNode.group_offsets_path(g): g for g in groups}
        return sorted(g for p, g in paths.items() if self._store.exists(p) is not None)

    async def has_offsets(self, group_id: str) -> bool:
        return bool(await asyncio.to_thread(self._committed_partitions, group_id))

    async def delete_group(self, group_id: str) -> None:
        """The group's znode with all its committed offsets (DeleteGroups)."""

        def delete() -> None:
            with contextlib.suppress(ZkNoNode):
                self._store.delete(f"{ConsumerOffsetZNode.root}/{group_id}", recursive=True)

        await asyncio.to_thread(delete)

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
