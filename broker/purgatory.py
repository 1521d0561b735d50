"""Delayed operations (Kafka's DelayedOperationPurgatory) on the asyncio loop.

An operation waits for a condition on some partitions, or for its timeout. Whoever changes a
partition (an append, an HW move, a leadership change) calls `check(tp)`; every operation
watching it re-tests its condition for that partition (Kafka's purgatory is keyed the same way)
and completes if it holds. All on the loop thread.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Iterable
from typing import Generic, TypeVar

from minibroker.core.types import TopicPartition

R = TypeVar("R")


class DelayedOperation(Generic[R]):
    """Subclasses define `try_complete` (return a result to finish now, or None to keep
    waiting; `changed` is the partition that changed, None for the first try, which looks at
    all of them) and `on_expiration` (the result when time runs out)."""

    def __init__(self, timeout_ms: int) -> None:
        loop = asyncio.get_running_loop()
        self.future: asyncio.Future[R] = loop.create_future()
        self._timer = loop.call_later(max(timeout_ms, 0) / 1000, self._expire)

    def try_complete(self, changed: TopicPartition | None) -> R | None:
        raise NotImplementedError

    def on_expiration(self) -> R:
        raise NotImplementedError

    @property
    def done(self) -> bool:
        return self.future.done()

    def maybe_complete(self, changed: TopicPartition | None = None) -> bool:
        if self.done:
            return True
        result = self.try_complete(changed)
        if result is None:
            return False
        self._finish(result)
        return True

    def _finish(self, result: R) -> None:
        self._timer.cancel()
        if not self.future.done():
            self.future.set_result(result)

    def _expire(self) -> None:
        if not self.future.done():
            self.future.set_result(self.on_expiration())


class Purgatory(Generic[R]):
    def __init__(self) -> None:
        self._watchers: dict[TopicPartition, set[DelayedOperation[R]]] = defaultdict(set)

    async def wait(self, op: DelayedOperation[R], keys: Iterable[TopicPartition]) -> R:
        """Complete at once if possible, else watch `keys` until done or expired."""
        if not op.maybe_complete():
            keys = list(keys)
            for key in keys:
                self._watchers[key].add(op)
            try:
                return await op.future
            finally:
                for key in keys:
                    watchers = self._watchers.get(key)
                    if watchers is not None:
                        watchers.discard(op)
                        if not watchers:
                            del self._watchers[key]
        return op.future.result()

    def check(self, key: TopicPartition) -> int:
        """Re-test the operations watching `key`; returns how many completed."""
        completed = 0
        for op in list(self._watchers.get(key, ())):
            if op.maybe_complete(key):
                completed += 1
        return completed

    def watched(self) -> int:
        return sum(len(v) for v in self._watchers.values())
