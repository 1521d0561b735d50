"""Kafka's ACL model and AclAuthorizer's decision, without I/O
(`kafka/security/authorizer/AclAuthorizer.scala`, `org.apache.kafka.common.acl`,
`org.apache.kafka.common.resource`): resources, patterns, entries, filters and `authorize`.

The decision for (principal, host, operation, resource): a super user may do anything;
otherwise the ACLs that match the resource are its literal name, the literal wildcard "*" and
every prefixed pattern the name starts with. None at all: `allow.everyone.if.no.acl.found`.
A Deny entry for the principal (or User:*) from the host (or *) on the operation (or All) wins;
otherwise an Allow entry must exist, where Describe is implied by Read, Write, Delete and Alter,
and DescribeConfigs by AlterConfigs."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import TypeVar

WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"  # the one Cluster resource's name (Resource.CLUSTER_NAME)
E = TypeVar("E", bound=IntEnum)


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6


class AclOperation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class AclPermissionType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


def pascal_name(member: IntEnum) -> str:
    """Kafka's names in znodes and tools: CLUSTER_ACTION → ClusterAction (SecurityUtils)."""
    return "".join(part.capitalize() for part in member.name.split("_"))


def from_pascal_name(enum: type[E], name: str) -> E:
    """The member whose Kafka name is `name` (case-insensitive, "_" ignored, as
    SecurityUtils.operation/permissionType/resourceType read them); ValueError otherwise."""
    key = name.replace("_", "").lower()
    for member in enum:
        if member.name.replace("_", "").lower() == key:
            return member
    raise ValueError(f"unknown {enum.__name__} {name!r}")


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL

    def __str__(self) -> str:
        return f"{pascal_name(self.resource_type)}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str  # "User:alice", or "User:*"
    host: str  # an IP address, or "*"
    operation: AclOperation
    permission_type: AclPermissionType

    def __str__(self) -> str:
        return (
            f"({self.principal} has {pascal_name(self.permission_type)} permission for "
            f"operation {pascal_name(self.operation)} from host {self.host})"
        )


@dataclass(frozen=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """What DescribeAcls and DeleteAcls select: None or ANY matches anything."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission_type: AclPermissionType = AclPermissionType.ANY

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        """ResourcePatternFilter.matches (MATCH selects every pattern that applies to name)."""
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
            return self.name == pattern.name
        if pattern.pattern_type is PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        return self.name.startswith(pattern.name)

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        return (
            self.principal in (None, entry.principal)
            and self.host in (None, entry.host)
            and self.operation in (AclOperation.ANY, entry.operation)
            and self.permission_type in (AclPermissionType.ANY, entry.permission_type)
        )

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)


def binding_problem(binding: AclBinding) -> str | None:
    """Why CreateAcls refuses a binding (None: it may be created): only concrete values, a
    LITERAL or PREFIXED pattern, and the Cluster resource only as "kafka-cluster"."""
    p, e = binding.pattern, binding.entry
    if p.resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
        return "the resource type must be concrete"
    if p.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return "the pattern type must be LITERAL or PREFIXED"
    if not p.name:
        return "the resource name must not be empty"
    if p.resource_type is ResourceType.CLUSTER and p.name != CLUSTER_NAME:
        return f"the Cluster resource is named {CLUSTER_NAME}"
    if p.pattern_type is PatternType.PREFIXED and p.name == WILDCARD_RESOURCE:
        return "a PREFIXED pattern cannot be the wildcard '*'"
    if e.operation in (AclOperation.ANY, AclOperation.UNKNOWN):
        return "the operation must be concrete"
    if e.permission_type in (AclPermissionType.ANY, AclPermissionType.UNKNOWN):
        return "the permission type must be Allow or Deny"
    if ":" not in e.principal or not e.principal.split(":", 1)[1]:
        return f"the principal {e.principal!r} must be Type:name"
    if not e.host:
        return "the host must be an address or '*'"
    return None


# What an Allow entry for an operation also grants (AclAuthorizer.allowAclExists).
_IMPLIED_BY: Mapping[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}

AclIndex = Mapping[ResourcePattern, frozenset[AccessControlEntry]]


def matching_acls(
    acls: AclIndex, resource_type: ResourceType, name: str
) -> list[AccessControlEntry]:
    """The entries that apply to resource (type, name): literal, wildcard, prefixed."""
    out: list[AccessControlEntry] = []
    out.extend(acls.get(ResourcePattern(resource_type, name), ()))
    if name != WILDCARD_RESOURCE:
        out.extend(acls.get(ResourcePattern(resource_type, WILDCARD_RESOURCE), ()))
    for pattern, entries in acls.items():
        if (
            pattern.pattern_type is PatternType.PREFIXED
            and pattern.resource_type is resource_type
            and name.startswith(pattern.name)
        ):
            out.extend(entries)
    return out


def _exists(
    entries: Iterable[AccessControlEntry],
    operation: AclOperation,
    principal: str,
    host: str,
    permission: AclPermissionType,
) -> bool:
    return any(
        e.permission_type is permission
        and e.principal in (principal, WILDCARD_PRINCIPAL)
        and e.operation in (operation, AclOperation.ALL)
        and e.host in (host, WILDCARD_HOST)
        for e in entries
    )


@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorize(
    acls: AclIndex,
    config: AuthorizerConfig,
    principal: str,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """AclAuthorizer.authorizeAction for one literal resource."""
    if principal in config.super_users:
        return True
    entries = matching_acls(acls, resource_type, name)
    if not entries:
        return config.allow_everyone_if_no_acl_found
    if _exists(entries, operation, principal, host, AclPermissionType.DENY):
        return False
    allowing = _IMPLIED_BY.get(operation, frozenset({operation}))
    return any(_exists(entries, op, principal, host, AclPermissionType.ALLOW) for op in allowing)
