"""The ACLs a broker authorizes with (AclAuthorizer's cache): every pattern under `/kafka-acl`
and `/kafka-acl-extended/prefixed` read at start, then each change notification under
`/kafka-acl-changes` and `/kafka-acl-extended-changes` handled once in sequence order by
reading that one pattern again (ZkNodeChangeNotificationListener). Notifications older than
15 minutes are deleted, as Kafka's listener does. Each change is an `acls_changed` event."""

from __future__ import annotations

import asyncio
import contextlib
import logging

from minibroker.core.security.acl import AccessControlEntry, ResourcePattern
from minibroker.core.zk_layout import ZNodeFormatError, sequence_number
from minibroker.core.zk_layout.security import (
    ACL_CHANGE_PREFIX,
    EXTENDED_ACL_CHANGES,
    LITERAL_ACL_CHANGES,
    AclChangeZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_errors import ZkError, ZkNoNode
from minibroker.runtime.zk_store import ZkStore
from minibroker.security import acl_store

CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ROOTS = (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)


class AclCache:
    def __init__(self, store: ZkStore) -> None:
        self.store = store
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._last_seq = dict.fromkeys(ROOTS, -1)
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Follow the notifications first, then load (AclAuthorizer.configure's order), so no
        change between the two is missed."""
        await asyncio.to_thread(acl_store.ensure_acl_paths, self.store)
        loop = asyncio.get_running_loop()

        def changed(_children: list[str]) -> None:
            loop.call_soon_threadsafe(self._wake.set)

        for root in ROOTS:
            await asyncio.to_thread(self.store.watch_children, root, changed)
        self.acls = await asyncio.to_thread(acl_store.read_all, self.store)
        slog.event("acls_loaded", patterns=len(self.acls))
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
                for root in ROOTS:
                    await self._process(root)
            except ZkError as exc:
                slog.event("acl_change_failed", logging.WARNING, error=str(exc))
                await asyncio.sleep(1)
                self._wake.set()

    async def _process(self, root: str) -> None:
        children = await asyncio.to_thread(self.store.children, root)
        fresh = sorted(
            (sequence_number(c, ACL_CHANGE_PREFIX), c)
            for c in children
            if c.startswith(ACL_CHANGE_PREFIX) and c[len(ACL_CHANGE_PREFIX) :].isdigit()
        )
        todo = [(seq, c) for seq, c in fresh if seq > self._last_seq[root]]
        if todo:
            got = await asyncio.to_thread(self.store.get_many, [f"{root}/{c}" for _, c in todo])
            for seq, child in todo:
                found = got.get(f"{root}/{child}")
                if found is not None:
                    await self._reload(child, found[0])
                self._last_seq[root] = seq
        await self._purge(root, [c for _, c in fresh])

    def put(self, pattern: ResourcePattern, entries: frozenset[AccessControlEntry]) -> None:
        """What this broker itself just wrote (AclAuthorizer updates its cache on a write, so
        a describe right after a create sees it); the notification confirms it later."""
        if entries:
            self.acls[pattern] = entries
        else:
            self.acls.pop(pattern, None)

    async def _reload(self, node: str, data: bytes | None) -> None:
        try:
            pattern = AclChangeZNode.decode(data)
        except ZNodeFormatError as exc:
            slog.event("acl_change_ignored", logging.WARNING, node=node, error=str(exc))
            return
        entries, _version = await asyncio.to_thread(acl_store.read_pattern, self.store, pattern)
        self.put(pattern, entries)
        slog.event(
            "acls_changed", resource=str(pattern), acls=sorted(str(e) for e in entries), node=node
        )

    async def _purge(self, root: str, children: list[str]) -> None:
        if not children:
            return
        got = await asyncio.to_thread(self.store.get_many, [f"{root}/{c}" for c in children])
        cutoff = now_ms() - CHANGE_EXPIRATION_MS
        for path, found in got.items():
            if found is not None and found[1].ctime_ms < cutoff:
                with contextlib.suppress(ZkNoNode, ZkError):
                    await asyncio.to_thread(self.store.delete, path)
