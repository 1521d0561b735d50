"""Producer ids for idempotent producers (Kafka's ProducerIdManager): a broker takes a block of
1,000 ids at a time from /latest_producer_id_block with a conditional write, so no two brokers
ever hand out the same id, and gives them out one by one."""

from __future__ import annotations

import asyncio

from minibroker.core.zk_layout import ProducerIdBlock, ProducerIdBlockZNode, next_block
from minibroker.runtime.zk_errors import ZkBadVersion, ZkNodeExists
from minibroker.runtime.zk_store import ZkStore

MAX_ATTEMPTS = 20  # other brokers taking blocks at the same moment


class ProducerIdManager:
    def __init__(self, store: ZkStore, broker_id: int) -> None:
        self._store = store
        self._broker_id = broker_id
        self._next = 0
        self._end = -1  # nothing taken yet
        self._taking = asyncio.Lock()  # one block at a time on this loop (the shell, not a rule)

    async def next_producer_id(self) -> int:
        async with self._taking:
            if self._next > self._end:
                block = await asyncio.to_thread(self.take_block)
                self._next, self._end = block.block_start, block.block_end
            self._next += 1
            return self._next - 1

    def take_block(self) -> ProducerIdBlock:
        """Claim the block after the latest one, conditionally (runs in a worker thread)."""
        for _ in range(MAX_ATTEMPTS):
            got = self._store.get_or_none(ProducerIdBlockZNode.path)
            if got is None:
                block = next_block(None, self._broker_id)
                try:
                    self._store.create(
                        ProducerIdBlockZNode.path, ProducerIdBlockZNode.encode(block)
                    )
                    return block
                except ZkNodeExists:
                    continue
            data, stat = got
            # Created empty with the cluster's persistent paths: no block taken yet.
            last = ProducerIdBlockZNode.decode(data) if data else None
            block = next_block(last, self._broker_id)
            try:
                self._store.set(
                    ProducerIdBlockZNode.path, ProducerIdBlockZNode.encode(block), stat.version
                )
                return block
            except ZkBadVersion:
                continue
        raise RuntimeError(f"no producer id block after {MAX_ATTEMPTS} attempts")
