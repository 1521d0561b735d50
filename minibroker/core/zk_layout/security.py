"""Security znodes (ops reference §5, Kafka's `ZkData.scala`): SCRAM credentials in
`/config/users/<user>`, ACLs in `/kafka-acl/<Type>/<name>` (literal) and
`/kafka-acl-extended/prefixed/<Type>/<name>`, and their change notifications
`/kafka-acl-changes/acl_changes_<seq>` (body `TOPIC:name`) and
`/kafka-acl-extended-changes/acl_changes_<seq>` (JSON)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from minibroker.core.security.acl import (
    AccessControlEntry,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    from_pascal_name,
    pascal_name,
)
from minibroker.core.security.scram import ScramCredential, ScramMechanism
from minibroker.core.zk_layout.json_codec import ZNodeFormatError, dumps, loads

# ---- SCRAM credentials ------------------------------------------------------------------------


class UserScramCredentialsZNode:
    """`/config/users/<user>`: `{"version":1,"config":{"SCRAM-SHA-256":"salt=..,..."}}`, the
    dynamic config of a user entity (ConfigEntityZNode's format); other keys (quotas) kept."""

    entity_type = "users"

    @staticmethod
    def path(user: str) -> str:
        return f"/config/users/{user}"

    @staticmethod
    def credentials(config: Mapping[str, str]) -> dict[ScramMechanism, ScramCredential]:
        """The valid SCRAM credentials in a user's config (a bad one is left out)."""
        out = {}
        for mechanism in ScramMechanism:
            text = config.get(mechanism.mechanism_name)
            if text is None:
                continue
            try:
                out[mechanism] = ScramCredential.from_text(text)
            except ValueError:
                continue
        return out


# ---- ACLs -------------------------------------------------------------------------------------

ACL_TYPES = (
    ResourceType.TOPIC,
    ResourceType.GROUP,
    ResourceType.CLUSTER,
    ResourceType.TRANSACTIONAL_ID,
    ResourceType.DELEGATION_TOKEN,
)
LITERAL_ACL_ROOT = "/kafka-acl"
PREFIXED_ACL_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_ACL_CHANGES = "/kafka-acl-extended-changes"
ACL_CHANGE_PREFIX = "acl_changes_"
ACL_PATHS = (
    LITERAL_ACL_ROOT,
    PREFIXED_ACL_ROOT,
    LITERAL_ACL_CHANGES,
    EXTENDED_ACL_CHANGES,
    *(
        f"{root}/{pascal_name(t)}"
        for root in (LITERAL_ACL_ROOT, PREFIXED_ACL_ROOT)
        for t in ACL_TYPES
    ),
)


def acl_type_root(pattern_type: PatternType, resource_type: ResourceType) -> str:
    root = LITERAL_ACL_ROOT if pattern_type is PatternType.LITERAL else PREFIXED_ACL_ROOT
    return f"{root}/{pascal_name(resource_type)}"


class AclZNode:
    """One resource pattern's ACLs (AclEntry's JSON, keys in Kafka's order)."""

    @staticmethod
    def path(pattern: ResourcePattern) -> str:
        return f"{acl_type_root(pattern.pattern_type, pattern.resource_type)}/{pattern.name}"

    @staticmethod
    def encode(entries: Iterable[AccessControlEntry]) -> bytes:
        return dumps(
            {
                "version": 1,
                "acls": [
                    {
                        "principal": e.principal,
                        "permissionType": pascal_name(e.permission_type),
                        "operation": pascal_name(e.operation),
                        "host": e.host,
                    }
                    for e in sorted(entries)
                ],
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> frozenset[AccessControlEntry]:
        if not data:
            return frozenset()
        obj = loads(data, "ACL znode")
        raw = obj.get("acls")
        if not isinstance(raw, list):
            raise ZNodeFormatError("ACL znode: 'acls' must be a list")
        out = set()
        for item in raw:
            try:
                out.add(
                    AccessControlEntry(
                        principal=str(item["principal"]),
                        host=str(item["host"]),
                        operation=from_pascal_name(AclOperation, str(item["operation"])),
                        permission_type=from_pascal_name(
                            AclPermissionType, str(item["permissionType"])
                        ),
                    )
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ZNodeFormatError(f"ACL znode: bad entry {item!r}: {exc}") from None
        return frozenset(out)


class AclChangeZNode:
    """A change notification; where it goes and what it says depends on the pattern type
    (Kafka keeps the literal one in its pre-KIP-290 string form for old brokers)."""

    @staticmethod
    def path_prefix(pattern: ResourcePattern) -> str:
        root = (
            LITERAL_ACL_CHANGES
            if pattern.pattern_type is PatternType.LITERAL
            else EXTENDED_ACL_CHANGES
        )
        return f"{root}/{ACL_CHANGE_PREFIX}"

    @staticmethod
    def encode(pattern: ResourcePattern) -> bytes:
        if pattern.pattern_type is PatternType.LITERAL:
            # ZkAclChangeStore: the Java enum's name (TOPIC, TRANSACTIONAL_ID); both read back.
            return f"{pattern.resource_type.name}:{pattern.name}".encode()
        return dumps(
            {
                "version": 1,
                "resourceType": pattern.resource_type.name,
                "name": pattern.name,
                "patternType": pattern.pattern_type.name,
            }
        )

    @staticmethod
    def decode(data: bytes | None) -> ResourcePattern:
        text = (data or b"").decode("utf-8", "replace")
        try:
            if text.startswith("{"):
                obj = json.loads(text)
                return ResourcePattern(
                    ResourceType[str(obj["resourceType"])],
                    str(obj["name"]),
                    PatternType[str(obj["patternType"])],
                )
            type_name, sep, name = text.partition(":")
            if not sep:
                raise ValueError("expected Type:name")
            return ResourcePattern(from_pascal_name(ResourceType, type_name), name)
        except (KeyError, TypeError, ValueError) as exc:
            raise ZNodeFormatError(f"ACL change notification {text[:80]!r}: {exc}") from None
