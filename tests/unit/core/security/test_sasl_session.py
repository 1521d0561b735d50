"""The SASL state machine of a Kafka connection (SaslServerAuthenticatorTest's rules) and
SASL/PLAIN's token (PlainSaslServerTest)."""

from __future__ import annotations

import pytest

from minibroker.core.security.sasl import (
    API_VERSIONS,
    SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
    IllegalSaslState,
    PlainServer,
    SaslAuthenticationFailed,
    SaslServerSession,
    SaslState,
    UnsupportedSaslMechanism,
    parse_plain_token,
)

PRODUCE, METADATA = 0, 3


def session() -> SaslServerSession:
    return SaslServerSession(
        ["PLAIN", "SCRAM-SHA-256"], lambda _m: PlainServer(lambda u, p: (u, p) == ("alice", "pw"))
    )


def test_api_versions_then_handshake_then_authenticate() -> None:
    s = session()
    s.admit(API_VERSIONS)
    s.api_versions_answered()
    s.admit(SASL_HANDSHAKE)
    s.handshake("PLAIN", 1)
    s.admit(SASL_AUTHENTICATE)
    assert s.authenticate(b"\x00alice\x00pw") == b""
    assert s.state is SaslState.COMPLETE and s.principal == "User:alice"


@pytest.mark.parametrize("api_key", [PRODUCE, METADATA, SASL_AUTHENTICATE])
def test_unexpected_request_before_handshake_closes(api_key: int) -> None:
    """testUnexpectedRequestType: anything but ApiVersions/SaslHandshake fails the session."""
    s = session()
    with pytest.raises(IllegalSaslState, match="during SASL handshake"):
        s.admit(api_key)
    assert s.state is SaslState.FAILED


def test_api_versions_only_once_before_handshake() -> None:
    s = session()
    s.admit(API_VERSIONS)
    s.api_versions_answered()
    with pytest.raises(IllegalSaslState):
        s.admit(API_VERSIONS)


def test_request_other_than_authenticate_during_authentication_closes() -> None:
    s = session()
    s.handshake("PLAIN", 1)
    with pytest.raises(IllegalSaslState, match="during SASL authentication"):
        s.admit(METADATA)


def test_unsupported_mechanism() -> None:
    """testUnsupportedMechanism: UNSUPPORTED_SASL_MECHANISM, then the connection closes."""
    s = session()
    with pytest.raises(UnsupportedSaslMechanism, match="GSSAPI"):
        s.handshake("GSSAPI", 1)
    assert s.state is SaslState.FAILED


def test_handshake_v0_means_raw_tokens() -> None:
    s = session()
    s.handshake("PLAIN", 0)
    assert s.raw_tokens
    with pytest.raises(IllegalSaslState):
        s.admit(SASL_AUTHENTICATE)


def test_wrong_password_fails_the_session() -> None:
    s = session()
    s.handshake("PLAIN", 1)
    with pytest.raises(SaslAuthenticationFailed, match="Invalid username or password"):
        s.authenticate(b"\x00alice\x00nope")
    assert s.state is SaslState.FAILED and s.principal is None
    with pytest.raises(IllegalSaslState):
        s.authenticate(b"\x00alice\x00pw")


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (b"alice\x00pw", "expected 3 tokens, got 2"),
        (b"\x00a\x00b\x00c", "expected 3 tokens, got 4"),
        (b"\x00\x00pw", "username not specified"),
        (b"\x00alice\x00", "password not specified"),
        (b"bob\x00alice\x00pw", "authorization id"),
        (b"\xff\x00a\x00b", "not UTF-8"),
    ],
)
def test_malformed_plain_tokens(token: bytes, message: str) -> None:
    with pytest.raises(SaslAuthenticationFailed, match=message):
        parse_plain_token(token)


def test_plain_accepts_authzid_equal_to_username() -> None:
    assert parse_plain_token(b"alice\x00alice\x00pw") == ("alice", "alice", "pw")
