"""The token a gRPC client gets for a SCRAM (or PLAIN) login: what a gRPC call carries instead of
a client certificate (`authorization: Bearer <token>`), valid on every broker of the cluster
until it expires. *Pure*: time is an argument.

Kafka 2.6's own answer to "authenticate once, then present something cheaper" is the delegation
token (KIP-48): HMAC'd by `delegation.token.master.key`, disabled without one
(DELEGATION_TOKEN_AUTH_DISABLED), expiring after `delegation.token.expiry.time.ms`. This token is
that idea without Kafka's token store: the HMAC over the owner and the expiry *is* the token, so
every broker holding the master key checks it without ZooKeeper; deleting the owner's SCRAM
credentials revokes it (the broker checks the owner still has them), as does changing the key.

    mbt1.<base64url(JSON {"u": owner, "e": expiry ms, "n": nonce})>.<base64url(HMAC-SHA256)>
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass

PREFIX = "mbt1"
MAX_TOKEN_CHARS = 4096  # a longer one is refused before anything is decoded


class InvalidToken(ValueError):
    """The token is not one this cluster issued, or no longer valid; the message says which."""


@dataclass(frozen=True)
class Token:
    owner: str  # the user name; the principal is User:<owner>
    expiry_ms: int

    @property
    def principal(self) -> str:
        return f"User:{self.owner}"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _mac(key: bytes, signed: str) -> bytes:
    return hmac.new(key, signed.encode("ascii"), hashlib.sha256).digest()


def mint(key: bytes, owner: str, now_ms: int, lifetime_ms: int, nonce: str) -> tuple[str, Token]:
    """A token for `owner`, expiring `lifetime_ms` from now; `nonce` (random) makes two
    logins' tokens differ."""
    if not key:
        raise ValueError("no master key: tokens are disabled")
    token = Token(owner, now_ms + lifetime_ms)
    claims = {"u": owner, "e": token.expiry_ms, "n": nonce}
    signed = f"{PREFIX}.{_b64(json.dumps(claims, separators=(',', ':')).encode())}"
    return f"{signed}.{_b64(_mac(key, signed))}", token


def verify(key: bytes, text: str, now_ms: int) -> Token:
    """The token `text` stands for; InvalidToken if it is malformed, not signed with `key`,
    or expired."""
    if not key:
        raise InvalidToken("tokens are disabled on this broker (no delegation.token.master.key)")
    if len(text) > MAX_TOKEN_CHARS:
        raise InvalidToken(f"token longer than {MAX_TOKEN_CHARS} characters")
    prefix, _, rest = text.partition(".")
    payload, _, mac = rest.partition(".")
    if prefix != PREFIX or not payload or not mac:
        raise InvalidToken("not a minibroker token")
    try:
        given = _unb64(mac)
    except ValueError:
        raise InvalidToken("the token's signature does not decode") from None
    if not hmac.compare_digest(given, _mac(key, f"{prefix}.{payload}")):
        raise InvalidToken("the token's signature does not match (not issued by this cluster)")
    try:
        claims = json.loads(_unb64(payload))
        token = Token(str(claims["u"]), int(claims["e"]))
    except (ValueError, KeyError, TypeError):
        raise InvalidToken("the token's claims do not decode") from None
    if token.expiry_ms <= now_ms:
        raise InvalidToken(f"the token expired at {token.expiry_ms} (now {now_ms})")
    return token


def bearer(metadata: object) -> str | None:
    """The token of an `authorization: Bearer <token>` entry among a call's metadata pairs."""
    for key, value in metadata or ():  # type: ignore[attr-defined]
        if key == "authorization" and isinstance(value, str) and value.startswith("Bearer "):
            return value[len("Bearer ") :].strip()
    return None
