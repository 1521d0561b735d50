"""ssl.principal.mapping.rules (SslPrincipalMapperTest's cases)."""

from __future__ import annotations

import pytest

from minibroker.core.security.principal_mapping import (
    NoMatchingRule,
    map_principal,
    parse_rules,
)

DN = "CN=alice,OU=client,O=minibroker"


@pytest.mark.parametrize(
    ("rules", "expected"),
    [
        ("DEFAULT", DN),
        ("", DN),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1/,DEFAULT", "alice"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1/U", "ALICE"),
        ("RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$3/L", "alice@minibroker"),
        ("RULE:^CN=bob,.*$/bob/, RULE:^CN=([^,]*),.*$/user-$1/", "user-alice"),
        (r"RULE:^CN=(.*?),OU=client,O=mini\/broker$/$1/,DEFAULT", DN),
    ],
)
def test_rules_map_the_distinguished_name(rules: str, expected: str) -> None:
    assert map_principal(parse_rules(rules), DN) == expected


def test_no_matching_rule_is_an_error() -> None:
    with pytest.raises(NoMatchingRule):
        map_principal(parse_rules("RULE:^CN=bob$/bob/"), DN)


@pytest.mark.parametrize("rules", ["RULE:abc", "NOPE", "RULE:([/x/"])
def test_invalid_rules_are_refused(rules: str) -> None:
    with pytest.raises(ValueError):
        parse_rules(rules)
