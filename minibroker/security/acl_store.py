"""ACLs in ZooKeeper as Kafka's AclAuthorizer keeps them (`AclAuthorizer.updateResourceAcls`,
`KafkaZkClient`): one znode per resource pattern, changed by compare-and-set on its zkVersion
(retried on a conflict, up to 10 times as Kafka), and one change notification per changed
pattern, which every broker follows. Blocking calls: run them off the event loop."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable

from minibroker.core.security.acl import (
    AccessControlEntry,
    AclBinding,
    PatternType,
    ResourcePattern,
)
from minibroker.core.zk_layout.security import (
    ACL_PATHS,
    ACL_TYPES,
    AclChangeZNode,
    AclZNode,
    acl_type_root,
)
from minibroker.runtime.zk_client import ZkClient
from minibroker.runtime.zk_errors import ZkBadVersion, ZkNodeExists, ZkNoNode

MAX_UPDATE_RETRIES = 10
Entries = frozenset[AccessControlEntry]


class AclUpdateConflict(Exception):
    """The pattern's znode changed under every one of the retries."""


def ensure_acl_paths(zk: ZkClient) -> None:
    """KafkaZkClient.createAclPaths: the stores' type directories and the change roots."""
    zk.ensure_paths(ACL_PATHS)


def read_pattern(zk: ZkClient, pattern: ResourcePattern) -> tuple[Entries, int]:
    """The pattern's entries and zkVersion (-1: no znode)."""
    got = zk.get_or_none(AclZNode.path(pattern))
    if got is None:
        return frozenset(), -1
    return AclZNode.decode(got[0]), got[1].version


def read_all(zk: ZkClient) -> dict[ResourcePattern, Entries]:
    """Every pattern with entries (AclAuthorizer.loadCache)."""
    out: dict[ResourcePattern, Entries] = {}
    for pattern_type in (PatternType.LITERAL, PatternType.PREFIXED):
        for resource_type in ACL_TYPES:
            root = acl_type_root(pattern_type, resource_type)
            try:
                names = zk.children(root)
            except ZkNoNode:
                continue
            for name in names:
                pattern = ResourcePattern(resource_type, name, pattern_type)
                entries, _ = read_pattern(zk, pattern)
                if entries:
                    out[pattern] = entries
    return out


def update_pattern(
    zk: ZkClient, pattern: ResourcePattern, change: Callable[[Entries], Entries]
) -> tuple[Entries, Entries]:
    """Apply `change` to the pattern's entries with a conditional write; (before, after).
    A changed pattern gets a change notification."""
    for _attempt in range(MAX_UPDATE_RETRIES + 1):
        before, version = read_pattern(zk, pattern)
        after = change(before)
        if after == before:
            return before, after
        path = AclZNode.path(pattern)
        try:
            if not after:
                zk.delete(path, version=version)
            elif version < 0:
                zk.create(path, AclZNode.encode(after), makepath=True)
            else:
                zk.set(path, AclZNode.encode(after), version=version)
        except (ZkBadVersion, ZkNodeExists, ZkNoNode):
            time.sleep((100 + random.randrange(50)) / 1000)  # Kafka's backoff
            continue
        zk.create(
            AclChangeZNode.path_prefix(pattern),
            AclChangeZNode.encode(pattern),
            sequential=True,
            makepath=True,
        )
        return before, after
    raise AclUpdateConflict(f"ACLs of {pattern} changed under {MAX_UPDATE_RETRIES} retries")


def add_bindings(zk: ZkClient, bindings: Iterable[AclBinding]) -> dict[ResourcePattern, Entries]:
    """Add the bindings; each touched pattern's entries afterwards."""
    out: dict[ResourcePattern, Entries] = {}
    by_pattern: dict[ResourcePattern, set[AccessControlEntry]] = {}
    for b in bindings:
        by_pattern.setdefault(b.pattern, set()).add(b.entry)
    for pattern, entries in by_pattern.items():
        added = frozenset(entries)

        def grow(cur: Entries, added: Entries = added) -> Entries:
            return cur | added

        out[pattern] = update_pattern(zk, pattern, grow)[1]
    return out


def remove_entries(
    zk: ZkClient, pattern: ResourcePattern, doomed: Callable[[AccessControlEntry], bool]
) -> tuple[Entries, Entries]:
    """Remove the entries `doomed` selects; (the ones removed, the ones left)."""
    before, after = update_pattern(
        zk, pattern, lambda cur: frozenset(e for e in cur if not doomed(e))
    )
    return before - after, after
