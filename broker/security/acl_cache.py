"""The ACLs a broker authorizes with (AclAuthorizer's cache): every pattern under `/kafka-acl`
and `/kafka-acl-extended/prefixed` read at start, then each change notification under
`/kafka-acl-changes` and `/kafka-acl-extended-changes` handled once in sequence order by
reading that one pattern again (broker/zk_notifications.py, Kafka's
ZkNodeChangeNotificationListener). Each change is an `acls_changed` event."""

from __future__ import annotations

import asyncio
import logging

from broker.zk_notifications import ChangeNotificationListener
from minibroker.core.security.acl import AccessControlEntry, ResourcePattern
from minibroker.core.zk_layout import ZNodeFormatError
from minibroker.core.zk_layout.security import (
    ACL_CHANGE_PREFIX,
    EXTENDED_ACL_CHANGES,
    LITERAL_ACL_CHANGES,
    AclChangeZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_store import ZkStore
from minibroker.security import acl_store

ROOTS = (LITERAL_ACL_CHANGES, EXTENDED_ACL_CHANGES)


class AclCache:
    def __init__(self, store: ZkStore) -> None:
        self.store = store
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._changes = ChangeNotificationListener(
            store, ROOTS, ACL_CHANGE_PREFIX, self._reload, "acl_change_failed"
        )

    async def start(self) -> None:
        """Follow the notifications first, then load (AclAuthorizer.configure's order), so no
        change between the two is missed."""
        await asyncio.to_thread(acl_store.ensure_acl_paths, self.store)
        await self._changes.watch()
        self.acls = await asyncio.to_thread(acl_store.read_all, self.store)
        slog.event("acls_loaded", patterns=len(self.acls))
        self._changes.run()

    async def stop(self) -> None:
        await self._changes.stop()

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
