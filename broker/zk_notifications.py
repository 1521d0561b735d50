"""Kafka's ZkNodeChangeNotificationListener (`kafka/common/ZkNodeChangeNotificationListener.scala`)
for a broker: sequential notification znodes (`<prefix><10 digits>`) under one or more roots,
each handled once and in sequence order, the handled ones older than 15 minutes deleted
(`changeExpirationMs`; every broker tries, a node another deleted first is simply gone).

Used for config changes (`/config/changes`, broker/dynamic_config.py) and ACL changes
(`/kafka-acl-changes`, `/kafka-acl-extended-changes`, broker/security/acl_cache.py)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence

from minibroker.core.zk_layout import sequence_number
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_store import ZkError, ZkNoNode, ZkStore

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # Kafka's ZkNodeChangeNotificationListener default

# A notification's node name and data; it says what to read again.
Handler = Callable[[str, bytes | None], Awaitable[None]]


class ChangeNotificationListener:
    def __init__(
        self,
        store: ZkStore,
        roots: Sequence[str],
        prefix: str,
        handle: Handler,
        failed_event: str,
    ) -> None:
        self.store = store
        self.roots = tuple(roots)
        self.prefix = prefix
        self.handle = handle
        self.failed_event = failed_event  # the event when ZooKeeper fails a round (retried)
        self._last_seq = dict.fromkeys(self.roots, -1)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def watch(self) -> None:
        """Watch the roots (before the caller loads the state the notifications change, so
        that no change between the two is missed)."""
        loop = asyncio.get_running_loop()

        def changed(_children: list[str]) -> None:
            loop.call_soon_threadsafe(self._wake.set)

        for root in self.roots:
            await asyncio.to_thread(self.store.watch_children, root, changed)

    def run(self) -> None:
        """Handle the notifications from now on (after `watch` and the caller's load)."""
        self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                for root in self.roots:
                    await self._process(root)
            except ZkError as exc:  # connection trouble: retried a second later
                slog.event(self.failed_event, logging.WARNING, error=str(exc))
                await asyncio.sleep(1)
                self._wake.set()

    async def _process(self, root: str) -> None:
        children = await asyncio.to_thread(self.store.children, root)
        prefix = self.prefix
        fresh = sorted(
            (sequence_number(c, prefix), c)
            for c in children
            if c.startswith(prefix) and c[len(prefix) :].isdigit()
        )
        todo = [(seq, c) for seq, c in fresh if seq > self._last_seq[root]]
        if todo:
            got = await asyncio.to_thread(self.store.get_many, [f"{root}/{c}" for _, c in todo])
            for seq, child in todo:
                found = got.get(f"{root}/{child}")
                if found is not None:
                    await self.handle(child, found[0])
                self._last_seq[root] = seq
        await self._purge(root, [c for _, c in fresh])

    async def _purge(self, root: str, children: list[str]) -> None:
        if not children:
            return
        got = await asyncio.to_thread(self.store.get_many, [f"{root}/{c}" for c in children])
        cutoff = now_ms() - CHANGE_EXPIRATION_MS
        old = [p for p, found in got.items() if found is not None and found[1].ctime_ms < cutoff]
        for path in old:
            with contextlib.suppress(ZkNoNode, ZkError):
                await asyncio.to_thread(self.store.delete, path)
