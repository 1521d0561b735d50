"""AclAuthorizer's decision and Kafka's ACL znodes (AclAuthorizerTest, AclEntryTest,
ResourcePatternFilterTest names where a case comes from them)."""

from __future__ import annotations

import pytest

from minibroker.core.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AuthorizerConfig,
    PatternType,
    ResourcePattern,
    ResourceType,
    authorize,
    binding_problem,
)
from minibroker.core.zk_layout.security import AclChangeZNode, AclZNode

Op, Perm, T, P = AclOperation, AclPermissionType, ResourceType, PatternType
ALICE, BOB = "User:alice", "User:bob"
HOST = "10.0.0.1"
DEFAULT = AuthorizerConfig()


def entry(
    principal: str, op: AclOperation, perm: AclPermissionType = Perm.ALLOW, host: str = "*"
) -> AccessControlEntry:
    return AccessControlEntry(principal, host, op, perm)


Index = dict[ResourcePattern, frozenset[AccessControlEntry]]


def index(*pairs: tuple[ResourcePattern, AccessControlEntry]) -> Index:
    out: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
    for pattern, e in pairs:
        out[pattern] = out.get(pattern, frozenset()) | {e}
    return out


TOPIC = ResourcePattern(T.TOPIC, "orders")


def allowed(
    acls: Index,
    principal: str = ALICE,
    op: AclOperation = Op.READ,
    name: str = "orders",
    rtype: ResourceType = T.TOPIC,
    host: str = HOST,
    cfg: AuthorizerConfig = DEFAULT,
) -> bool:
    return authorize(acls, cfg, principal, host, op, rtype, name)


def test_empty_acl_denies_by_default_and_allows_with_allow_everyone() -> None:
    """testEmptyAclThrowsException / testAllowAllAccess."""
    assert not allowed({})
    assert allowed({}, cfg=AuthorizerConfig(allow_everyone_if_no_acl_found=True))


def test_super_user_has_access_without_acls() -> None:
    """testSuperUserHasAccess."""
    cfg = AuthorizerConfig(super_users=frozenset({"User:admin"}))
    deny = index((TOPIC, entry("User:admin", Op.ALL, Perm.DENY)))
    assert allowed(deny, principal="User:admin", cfg=cfg)


def test_deny_takes_precedence() -> None:
    """testDenyTakesPrecedence."""
    acls = index((TOPIC, entry(ALICE, Op.READ)), (TOPIC, entry(ALICE, Op.READ, Perm.DENY, HOST)))
    assert not allowed(acls)


def test_acls_for_other_principals_deny_and_do_not_fall_back_to_allow_everyone() -> None:
    acls = index((TOPIC, entry(BOB, Op.READ)))
    assert not allowed(acls, cfg=AuthorizerConfig(allow_everyone_if_no_acl_found=True))
    assert allowed(acls, principal=BOB)


def test_wildcard_principal_and_host() -> None:
    """testAllowAccessWithCustomPrincipal / testWildCardAcls."""
    acls = index((TOPIC, entry("User:*", Op.READ)))
    assert allowed(acls) and allowed(acls, principal=BOB)
    host_only = index((TOPIC, entry(ALICE, Op.READ, host="10.0.0.2")))
    assert not allowed(host_only) and allowed(host_only, host="10.0.0.2")


def test_wildcard_resource_applies_to_every_name() -> None:
    acls = index((ResourcePattern(T.TOPIC, "*"), entry(ALICE, Op.WRITE)))
    assert allowed(acls, op=Op.WRITE, name="anything")
    assert not allowed(acls, op=Op.WRITE, rtype=T.GROUP, name="anything")


def test_prefixed_acls_apply_to_names_with_the_prefix() -> None:
    """testAccessAllowedIfAllowAclExistsOnPrefixedResource."""
    acls = index((ResourcePattern(T.TOPIC, "ord", P.PREFIXED), entry(ALICE, Op.READ)))
    assert allowed(acls, name="orders") and allowed(acls, name="ord")
    assert not allowed(acls, name="or") and not allowed(acls, name="xorders")


def test_deny_on_prefix_beats_allow_on_literal() -> None:
    """testAccessDeniedIfDenyAclExistsOnPrefixedResource."""
    acls = index(
        (TOPIC, entry(ALICE, Op.READ)),
        (ResourcePattern(T.TOPIC, "ord", P.PREFIXED), entry(ALICE, Op.READ, Perm.DENY)),
    )
    assert not allowed(acls)


@pytest.mark.parametrize("granting", [Op.READ, Op.WRITE, Op.DELETE, Op.ALTER, Op.DESCRIBE])
def test_describe_is_implied_by_read_write_delete_alter(granting: AclOperation) -> None:
    """testImpliedAllowsForDescribe... (allowAclExists's DESCRIBE set)."""
    assert allowed(index((TOPIC, entry(ALICE, granting))), op=Op.DESCRIBE)


def test_describe_is_not_implied_by_create() -> None:
    assert not allowed(index((TOPIC, entry(ALICE, Op.CREATE))), op=Op.DESCRIBE)


def test_describe_configs_implied_by_alter_configs_only() -> None:
    assert allowed(index((TOPIC, entry(ALICE, Op.ALTER_CONFIGS))), op=Op.DESCRIBE_CONFIGS)
    assert not allowed(index((TOPIC, entry(ALICE, Op.ALTER))), op=Op.DESCRIBE_CONFIGS)


def test_implied_allow_does_not_override_an_explicit_deny() -> None:
    acls = index((TOPIC, entry(ALICE, Op.READ)), (TOPIC, entry(ALICE, Op.DESCRIBE, Perm.DENY)))
    assert not allowed(acls, op=Op.DESCRIBE) and allowed(acls, op=Op.READ)


def test_all_operation_allows_and_denies_everything() -> None:
    assert allowed(index((TOPIC, entry(ALICE, Op.ALL))), op=Op.ALTER_CONFIGS)
    acls = index((TOPIC, entry(ALICE, Op.READ)), (TOPIC, entry(ALICE, Op.ALL, Perm.DENY)))
    assert not allowed(acls)


def test_filter_match_selects_literal_wildcard_and_prefixes() -> None:
    """ResourcePatternFilterTest: MATCH finds every pattern applying to the name."""
    f = AclBindingFilter(T.TOPIC, "orders", P.MATCH)
    assert f.matches_pattern(ResourcePattern(T.TOPIC, "orders"))
    assert f.matches_pattern(ResourcePattern(T.TOPIC, "*"))
    assert f.matches_pattern(ResourcePattern(T.TOPIC, "ord", P.PREFIXED))
    assert not f.matches_pattern(ResourcePattern(T.TOPIC, "orders2"))
    assert not f.matches_pattern(ResourcePattern(T.GROUP, "orders"))
    exact = AclBindingFilter(T.TOPIC, "ord", P.PREFIXED)
    assert exact.matches_pattern(ResourcePattern(T.TOPIC, "ord", P.PREFIXED))
    assert not exact.matches_pattern(ResourcePattern(T.TOPIC, "ord"))
    anything = AclBindingFilter()
    assert anything.matches(AclBinding(TOPIC, entry(BOB, Op.WRITE, Perm.DENY)))
    assert not AclBindingFilter(principal=ALICE).matches(AclBinding(TOPIC, entry(BOB, Op.WRITE)))


@pytest.mark.parametrize(
    ("pattern", "e", "problem"),
    [
        (ResourcePattern(T.ANY, "x"), entry(ALICE, Op.READ), "resource type"),
        (ResourcePattern(T.TOPIC, "x", P.MATCH), entry(ALICE, Op.READ), "pattern type"),
        (ResourcePattern(T.CLUSTER, "other"), entry(ALICE, Op.ALTER), "kafka-cluster"),
        (ResourcePattern(T.TOPIC, "x"), entry(ALICE, Op.ANY), "operation"),
        (ResourcePattern(T.TOPIC, "x"), entry(ALICE, Op.READ, Perm.ANY), "permission"),
        (ResourcePattern(T.TOPIC, "x"), entry("alice", Op.READ), "Type:name"),
        (ResourcePattern(T.TOPIC, ""), entry(ALICE, Op.READ), "empty"),
    ],
)
def test_bindings_create_acls_refuses(
    pattern: ResourcePattern, e: AccessControlEntry, problem: str
) -> None:
    assert problem in (binding_problem(AclBinding(pattern, e)) or "")


def test_acl_znode_json_is_kafkas() -> None:
    """AclEntry's JSON: version 1, PascalCase operation and permission type."""
    data = AclZNode.encode([entry("User:alice", Op.IDEMPOTENT_WRITE)])
    assert data == (
        b'{"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow",'
        b'"operation":"IdempotentWrite","host":"*"}]}'
    )
    assert AclZNode.decode(data) == {entry("User:alice", Op.IDEMPOTENT_WRITE)}
    assert (
        AclZNode.path(ResourcePattern(T.TRANSACTIONAL_ID, "tx")) == "/kafka-acl/TransactionalId/tx"
    )
    assert (
        AclZNode.path(ResourcePattern(T.TOPIC, "foo-", P.PREFIXED))
        == "/kafka-acl-extended/prefixed/Topic/foo-"
    )


def test_acl_change_notifications_as_kafka_writes_them() -> None:
    literal = ResourcePattern(T.TOPIC, "topic-1")
    assert AclChangeZNode.encode(literal) == b"TOPIC:topic-1"
    assert AclChangeZNode.decode(b"Topic:topic-1") == literal  # as Kafka before 2.0 wrote it
    tx = ResourcePattern(T.TRANSACTIONAL_ID, "tx1")
    assert AclChangeZNode.encode(tx) == b"TRANSACTIONAL_ID:tx1"
    assert AclChangeZNode.path_prefix(literal) == "/kafka-acl-changes/acl_changes_"
    prefixed = ResourcePattern(T.TOPIC, "foo-", P.PREFIXED)
    assert AclChangeZNode.encode(prefixed) == (
        b'{"version":1,"resourceType":"TOPIC","name":"foo-","patternType":"PREFIXED"}'
    )
    assert AclChangeZNode.path_prefix(prefixed) == "/kafka-acl-extended-changes/acl_changes_"
    for p in (literal, prefixed, ResourcePattern(T.CLUSTER, "kafka-cluster")):
        assert AclChangeZNode.decode(AclChangeZNode.encode(p)) == p
