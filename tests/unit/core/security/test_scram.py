"""SCRAM as Kafka 2.6 does it (ScramFormatterTest, ScramCredentialUtilsTest, ScramSaslServerTest,
ScramMessagesTest) plus RFC 7677's SCRAM-SHA-256 example exchange, byte for byte."""

from __future__ import annotations

import base64

import pytest

from minibroker.core.security.sasl import SaslAuthenticationFailed
from minibroker.core.security.scram import (
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    make_credential,
    password_matches,
    sasl_name,
    username_from_sasl_name,
)

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512

# RFC 7677 section 3.
RFC_CLIENT_FIRST = b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO"
RFC_SERVER_NONCE = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0"
RFC_SALT = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
RFC_SERVER_FIRST = (
    b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
)
RFC_CLIENT_FINAL = (
    b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
    b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
)
RFC_SERVER_FINAL = b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="


def rfc_credential() -> ScramCredential:
    return make_credential(SHA256, "pencil", RFC_SALT, 4096)


def test_rfc7677_exchange_server_side() -> None:
    server = ScramServer(SHA256, {"user": rfc_credential()}.get, RFC_SERVER_NONCE)
    assert server.evaluate(RFC_CLIENT_FIRST) == RFC_SERVER_FIRST
    assert server.evaluate(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL
    assert server.complete and server.username == "user"


def test_rfc7677_exchange_client_side() -> None:
    client = ScramClient(SHA256, "user", "pencil", "rOprNGfwEbeRWgbNEkqO")
    assert client.first() == RFC_CLIENT_FIRST
    assert client.final(RFC_SERVER_FIRST) == RFC_CLIENT_FINAL
    client.verify(RFC_SERVER_FINAL)


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_successful_authentication_both_mechanisms(mechanism: ScramMechanism) -> None:
    cred = make_credential(mechanism, "secret", b"0123456789abcdef")
    server = ScramServer(mechanism, {"alice": cred}.get, "srv")
    client = ScramClient(mechanism, "alice", "secret", "cli")
    client.verify(server.evaluate(client.final(server.evaluate(client.first()))))
    assert server.complete


def test_wrong_password_fails_and_the_exchange_stays_failed() -> None:
    cred = make_credential(SHA512, "secret", b"salt")
    server = ScramServer(SHA512, {"alice": cred}.get, "srv")
    client = ScramClient(SHA512, "alice", "guess", "cli")
    first = server.evaluate(client.first())
    with pytest.raises(SaslAuthenticationFailed, match="Invalid client credentials"):
        server.evaluate(client.final(first))
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(b"anything")
    assert not server.complete


def test_unknown_user_fails() -> None:
    server = ScramServer(SHA256, lambda _user: None, "srv")
    with pytest.raises(SaslAuthenticationFailed, match="Invalid user credentials"):
        server.evaluate(b"n,,n=mallory,r=abc")


def test_replayed_final_message_with_an_old_nonce_fails() -> None:
    """A client final message recorded from one exchange is refused in the next: the server
    issued a different nonce."""
    cred = rfc_credential()
    first = ScramServer(SHA256, {"user": cred}.get, RFC_SERVER_NONCE)
    first.evaluate(RFC_CLIENT_FIRST)
    first.evaluate(RFC_CLIENT_FINAL)
    replay = ScramServer(SHA256, {"user": cred}.get, "another-nonce")
    replay.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationFailed, match="nonce"):
        replay.evaluate(RFC_CLIENT_FINAL)


def test_authorization_id_different_from_username_fails() -> None:
    server = ScramServer(SHA256, {"user": rfc_credential()}.get, "srv")
    with pytest.raises(SaslAuthenticationFailed, match="authorization id"):
        server.evaluate(b"n,a=admin,n=user,r=abc")


def test_iterations_below_minimum_fail() -> None:
    weak = ScramCredential(b"s", b"k" * 32, b"k" * 32, 1000)
    server = ScramServer(SHA256, {"user": weak}.get, "srv")
    with pytest.raises(SaslAuthenticationFailed, match="less than the minimum 4096"):
        server.evaluate(b"n,,n=user,r=abc")
    with pytest.raises(ValueError, match="minimum"):
        make_credential(SHA256, "p", b"s", 1000)


@pytest.mark.parametrize(
    "token",
    [
        b"",
        b"n,,",
        b"y,,n=user,r=abc",  # channel binding flags other than "n"
        b"n,,n=us=er,r=abc",  # "=" not escaped
        b"n,,n=user,r=a,b",
        b"\xff\xfe",
        b"n,,n=user",
    ],
)
def test_malformed_client_first_messages_fail(token: bytes) -> None:
    server = ScramServer(SHA256, {"user": rfc_credential()}.get, "srv")
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(token)


@pytest.mark.parametrize(
    "final",
    [
        b"",
        b"c=biws",
        b"p=abc",
        b"c=biws,r=x,p=!!!!",
        RFC_CLIENT_FINAL.rsplit(b",p=", 1)[0] + b",p=AAAA",  # a proof of the wrong length
    ],
)
def test_malformed_client_final_messages_fail(final: bytes) -> None:
    server = ScramServer(SHA256, {"user": rfc_credential()}.get, RFC_SERVER_NONCE)
    server.evaluate(RFC_CLIENT_FIRST)
    with pytest.raises(SaslAuthenticationFailed):
        server.evaluate(final)


def test_credential_text_round_trip_as_scram_credential_utils() -> None:
    cred = make_credential(SHA512, "password", b"salt-bytes", 8192)
    text = cred.to_text()
    assert text.startswith("salt=c2FsdC1ieXRlcw==,stored_key=")
    assert text.endswith(",iterations=8192")
    assert ScramCredential.from_text(text) == cred


@pytest.mark.parametrize(
    "text",
    ["", "salt=AA==", "salt=AA==,stored_key=AA==,server_key=AA==,iterations=x",
     "salt=AA==,stored_key=AA==,server_key=AA==,iterations=1,extra=1", "salt,stored_key"],
)  # fmt: skip
def test_invalid_credential_text_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        ScramCredential.from_text(text)


def test_password_matches_its_credential_only() -> None:
    cred = make_credential(SHA256, "right", b"salt")
    assert password_matches(SHA256, cred, "right")
    assert not password_matches(SHA256, cred, "wrong")


@pytest.mark.parametrize("name", ["alice", "a=b", "a,b", "=2C", "x=3D,"])
def test_sasl_name_escaping_round_trips(name: str) -> None:
    assert username_from_sasl_name(sasl_name(name)) == name
