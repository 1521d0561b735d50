"""The gRPC login token (minibroker.core.security.tokens): what a broker holding the master key
accepts, and every way a token is refused."""

from __future__ import annotations

import pytest

from minibroker.core.security.tokens import MAX_TOKEN_CHARS, InvalidToken, bearer, mint, verify

KEY = b"k" * 32
NOW = 1_700_000_000_000
HOUR = 3_600_000


def test_a_minted_token_verifies_to_its_owner_until_it_expires() -> None:
    text, token = mint(KEY, "alice", NOW, HOUR, "n")
    assert token.principal == "User:alice" and token.expiry_ms == NOW + HOUR
    assert verify(KEY, text, NOW + HOUR - 1) == token
    with pytest.raises(InvalidToken, match="expired"):
        verify(KEY, text, NOW + HOUR)


def test_two_logins_of_one_user_get_different_tokens() -> None:
    assert mint(KEY, "alice", NOW, HOUR, "n1")[0] != mint(KEY, "alice", NOW, HOUR, "n2")[0]


def test_a_token_of_another_key_or_altered_claims_is_refused() -> None:
    text, _ = mint(KEY, "alice", NOW, HOUR, "n")
    with pytest.raises(InvalidToken, match="signature does not match"):
        verify(b"other-key", text, NOW)
    prefix, payload, mac = text.split(".")
    _, forged = mint(b"attacker", "admin", NOW, 100 * HOUR, "n")
    forged_payload = mint(b"attacker", "admin", NOW, HOUR, "n")[0].split(".")[1]
    with pytest.raises(InvalidToken, match="signature does not match"):
        verify(KEY, f"{prefix}.{forged_payload}.{mac}", NOW)
    assert forged.owner == "admin"  # what the forger wanted, never granted


@pytest.mark.parametrize(
    "text",
    ["", "garbage", "mbt1.", "mbt1..", "mbt2.abc.def", "mbt1.abc.!!!", "x" * (MAX_TOKEN_CHARS + 1)],
)
def test_malformed_tokens_are_refused_without_a_crash(text: str) -> None:
    with pytest.raises(InvalidToken):
        verify(KEY, text, NOW)


def test_without_a_master_key_there_are_no_tokens() -> None:
    with pytest.raises(ValueError):
        mint(b"", "alice", NOW, HOUR, "n")
    with pytest.raises(InvalidToken, match="disabled"):
        verify(b"", "mbt1.a.b", NOW)


def test_bearer_reads_the_authorization_metadata() -> None:
    assert bearer((("x", "y"), ("authorization", "Bearer abc"))) == "abc"
    assert bearer((("authorization", "Basic abc"),)) is None
    assert bearer(None) is None
