"""The server side of SASL on a Kafka connection, without I/O (Kafka 2.6's
`SaslServerAuthenticator`): which request may come in which state, the handshake's mechanism
choice, and the mechanism exchange. The connection shell asks `admit` before reading a request
and closes the connection when it raises.

Kafka's rules: until authenticated, a client may send ApiVersions (first, once) and then
SaslHandshake; any other request closes the connection. A handshake naming a mechanism that is
not enabled is answered UNSUPPORTED_SASL_MECHANISM, then the connection closes. Handshake v0
means the tokens follow as raw size-prefixed frames; v1 means SaslAuthenticate requests. A
failed exchange is answered SASL_AUTHENTICATION_FAILED (v1), then the connection closes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import Enum
from typing import Protocol

API_VERSIONS = 18
SASL_HANDSHAKE = 17
SASL_AUTHENTICATE = 36
# SaslServerAuthenticator.MAX_RECEIVE_SIZE: the largest frame read before authentication.
MAX_RECEIVE_SIZE = 524288
PLAIN = "PLAIN"


class SaslAuthenticationFailed(Exception):
    """Authentication failed (SASL_AUTHENTICATION_FAILED); the message is safe to send."""


class IllegalSaslState(Exception):
    """A request that may not come now (Kafka's IllegalSaslStateException): close."""


class UnsupportedSaslMechanism(Exception):
    """The handshake named a mechanism that is not enabled: answer, then close."""


class MechanismServer(Protocol):
    @property
    def complete(self) -> bool: ...

    @property
    def username(self) -> str | None: ...

    def evaluate(self, token: bytes) -> bytes: ...


class SaslState(Enum):
    HANDSHAKE_OR_VERSIONS = "handshake_or_versions"
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslServerSession:
    """One connection's SASL state. `make_server(mechanism)` builds the mechanism's server
    once the handshake chose it."""

    def __init__(
        self, enabled: Iterable[str], make_server: Callable[[str], MechanismServer]
    ) -> None:
        self.enabled = tuple(enabled)
        self._make_server = make_server
        self.state = SaslState.HANDSHAKE_OR_VERSIONS
        self.mechanism: str | None = None
        self.raw_tokens = False  # handshake v0: tokens come without a Kafka header
        self._server: MechanismServer | None = None

    @property
    def principal(self) -> str | None:
        """`User:<name>` once complete."""
        if self.state is not SaslState.COMPLETE or self._server is None:
            return None
        return f"User:{self._server.username}"

    def admit(self, api_key: int) -> None:
        """Raise IllegalSaslState unless a request of `api_key` may come now."""
        state = self.state
        if state is SaslState.HANDSHAKE_OR_VERSIONS and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return
        if state is SaslState.HANDSHAKE and api_key == SASL_HANDSHAKE:
            return
        if state is SaslState.AUTHENTICATE and not self.raw_tokens and api_key == SASL_AUTHENTICATE:
            return
        self.state = SaslState.FAILED
        when = "SASL authentication" if state is SaslState.AUTHENTICATE else "SASL handshake"
        raise IllegalSaslState(f"Unexpected Kafka request of type {api_key} during {when}.")

    def api_versions_answered(self) -> None:
        self.state = SaslState.HANDSHAKE

    def handshake(self, mechanism: str, version: int) -> None:
        """Choose `mechanism`; UnsupportedSaslMechanism (after which the connection closes)
        when it is not enabled."""
        if mechanism not in self.enabled:
            self.state = SaslState.FAILED
            raise UnsupportedSaslMechanism(f"Unsupported SASL mechanism {mechanism}")
        self.mechanism = mechanism
        self.raw_tokens = version == 0
        self._server = self._make_server(mechanism)
        self.state = SaslState.AUTHENTICATE

    def authenticate(self, token: bytes) -> bytes:
        """The answer token; SaslAuthenticationFailed ends the session."""
        if self.state is not SaslState.AUTHENTICATE or self._server is None:
            self.state = SaslState.FAILED
            raise IllegalSaslState("SASL token before a handshake")
        try:
            answer = self._server.evaluate(token)
        except SaslAuthenticationFailed:
            self.state = SaslState.FAILED
            raise
        if self._server.complete:
            self.state = SaslState.COMPLETE
        return answer


def parse_plain_token(token: bytes) -> tuple[str, str, str]:
    """PLAIN's `authzid NUL username NUL password` (PlainSaslServer.extractTokens)."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed("Invalid SASL/PLAIN response: not UTF-8") from None
    parts = text.split("\x00")
    if len(parts) != 3:
        raise SaslAuthenticationFailed(
            f"Invalid SASL/PLAIN response: expected 3 tokens, got {min(len(parts), 4)}"
        )
    authzid, username, password = parts
    if not username:
        raise SaslAuthenticationFailed("Authentication failed: username not specified")
    if not password:
        raise SaslAuthenticationFailed("Authentication failed: password not specified")
    if authzid and authzid != username:
        raise SaslAuthenticationFailed(
            "Authentication failed: Client requested an authorization id that is different "
            "from username"
        )
    return authzid, username, password


class PlainServer:
    """SASL/PLAIN's server. Kafka 2.6's default callback checks a static JAAS list; minibroker
    checks the password against the user's SCRAM credential in ZooKeeper instead, so one
    `minibroker users add` serves every mechanism (a deliberate difference)."""

    def __init__(self, check_password: Callable[[str, str], bool]) -> None:
        self._check = check_password
        self.complete = False
        self.username: str | None = None

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslAuthenticationFailed("unexpected SASL/PLAIN token after completion")
        _authzid, username, password = parse_plain_token(token)
        if not self._check(username, password):
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        self.username = username
        self.complete = True
        return b""
