"""gRPC clients without a certificate: the `Authenticate` exchange (SCRAM-SHA-256/512 or PLAIN,
the same mechanisms and credentials as the KAFKA listener's SASL) that ends in a token
(minibroker.core.security.tokens), and the check of the token a later call carries.

Kafka has no gRPC; the rules follow its SASL server (SaslServerAuthenticator): a mechanism not
in `sasl.enabled.mechanisms` is UNSUPPORTED_SASL_MECHANISM, a failed exchange
SASL_AUTHENTICATION_FAILED with an `authentication_failed` event, and tokens need
`delegation.token.master.key` as Kafka's delegation tokens do (DELEGATION_TOKEN_AUTH_DISABLED).
Only on a TLS listener: a token sent in the clear could be replayed by anyone who saw it."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from typing import Any

from broker.security.credentials import CredentialCache
from broker.security.sasl_gate import mechanism_servers
from minibroker.core.errors import ErrorCode
from minibroker.core.security.sasl import (
    PLAIN,
    IllegalSaslState,
    MechanismServer,
    SaslAuthenticationFailed,
    UnsupportedSaslMechanism,
)
from minibroker.core.security.tokens import InvalidToken, Token, bearer, mint, verify
from minibroker.rpc import broker_pb2
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms

MAX_STEPS = 4  # SCRAM takes two client messages, PLAIN one
MAX_SASL_TOKEN = 64 << 10  # a larger client message is refused unread
STEP_TIMEOUT_S = 10.0  # a client that stops answering mid-exchange is dropped
VERIFIED_CACHE = 1024


def _refusal(code: ErrorCode, message: str) -> broker_pb2.AuthenticateResponse:
    return broker_pb2.AuthenticateResponse(error_code=int(code), error_message=message)


class TokenAuthority:
    """One broker's tokens: issued by `authenticate`, checked by `caller`."""

    def __init__(
        self,
        key: bytes,
        lifetime_ms: int,
        mechanisms: tuple[str, ...],
        credentials: Callable[[], CredentialCache | None],
    ) -> None:
        self.key = key
        self.lifetime_ms = lifetime_ms
        self.mechanisms = mechanisms
        self._credentials = credentials
        self._verified: OrderedDict[str, Token] = OrderedDict()

    # ---- the exchange --------------------------------------------------------------------

    async def authenticate(
        self, requests: AsyncIterator[Any], listener: str, peer: str, tls: bool
    ) -> AsyncIterator[broker_pb2.AuthenticateResponse]:
        """Answers to one Authenticate call: a challenge per client message, then the token;
        any refusal ends the call."""
        credentials = self._credentials()
        if not tls:
            yield _refusal(ErrorCode.SECURITY_DISABLED, f"listener {listener} is not TLS")
            return
        if not self.key or credentials is None:
            yield _refusal(
                ErrorCode.DELEGATION_TOKEN_AUTH_DISABLED,
                "tokens are disabled on this broker (no delegation.token.master.key)",
            )
            return
        server: MechanismServer | None = None
        mechanism = ""
        for _ in range(MAX_STEPS):
            try:
                async with asyncio.timeout(STEP_TIMEOUT_S):
                    request = await anext(requests)
            except StopAsyncIteration:
                return
            except TimeoutError:
                yield self._failed(
                    ErrorCode.ILLEGAL_SASL_STATE, "no message in time", listener, peer
                )
                return
            if len(request.sasl_token) > MAX_SASL_TOKEN:
                why = f"a SASL message over {MAX_SASL_TOKEN} bytes"
                yield self._failed(ErrorCode.ILLEGAL_SASL_STATE, why, listener, peer)
                return
            if server is None:
                mechanism = request.mechanism
                try:
                    server = self._server(mechanism, credentials)
                except UnsupportedSaslMechanism as exc:
                    yield self._failed(
                        ErrorCode.UNSUPPORTED_SASL_MECHANISM, str(exc), listener, peer
                    )
                    return
            elif request.mechanism and request.mechanism != mechanism:
                why = f"the mechanism changed mid-exchange ({mechanism} to {request.mechanism})"
                yield self._failed(ErrorCode.ILLEGAL_SASL_STATE, why, listener, peer)
                return
            try:
                reply = await self._evaluate(server, mechanism, bytes(request.sasl_token))
            except (SaslAuthenticationFailed, IllegalSaslState) as exc:
                yield self._failed(ErrorCode.SASL_AUTHENTICATION_FAILED, str(exc), listener, peer)
                return
            if not server.complete:
                yield broker_pb2.AuthenticateResponse(sasl_token=reply)
                continue
            owner = server.username or ""
            text, token = mint(self.key, owner, now_ms(), self.lifetime_ms, secrets.token_hex(8))
            slog.event(
                "client_authenticated", logging.DEBUG, listener=listener, peer=peer,
                principal=token.principal, mechanism=mechanism, token_expiry_ms=token.expiry_ms,
            )  # fmt: skip
            yield broker_pb2.AuthenticateResponse(
                sasl_token=reply, access_token=text, expiry_ms=token.expiry_ms,
                principal=token.principal,
            )  # fmt: skip
            return
        yield self._failed(
            ErrorCode.ILLEGAL_SASL_STATE, f"more than {MAX_STEPS} messages", listener, peer
        )

    def _server(self, mechanism: str, credentials: CredentialCache) -> MechanismServer:
        if mechanism not in self.mechanisms:
            raise UnsupportedSaslMechanism(
                f"Unsupported SASL mechanism {mechanism!r} (enabled: {', '.join(self.mechanisms)})"
            )
        return mechanism_servers(credentials)(mechanism)

    @staticmethod
    async def _evaluate(server: MechanismServer, mechanism: str, token: bytes) -> bytes:
        # PLAIN derives the password's key (PBKDF2): off the loop, as the SASL gate does.
        if mechanism == PLAIN:
            return await asyncio.to_thread(server.evaluate, token)
        return server.evaluate(token)

    @staticmethod
    def _failed(
        code: ErrorCode, reason: str, listener: str, peer: str
    ) -> broker_pb2.AuthenticateResponse:
        slog.event(
            "authentication_failed", logging.INFO, listener=listener, peer=peer, reason=reason,
            error=code.name,
        )  # fmt: skip
        return _refusal(code, reason)

    # ---- later calls ---------------------------------------------------------------------

    def caller(self, metadata: Any) -> Token | None:
        """The token a call carries (None: it carries none); InvalidToken if it is not valid
        now: forged, expired, or its owner has no credentials any more (deleted)."""
        text = bearer(metadata)
        if text is None:
            return None
        token = self._verified.get(text)
        if token is None:
            token = verify(self.key, text, now_ms())
            self._verified[text] = token
            if len(self._verified) > VERIFIED_CACHE:
                self._verified.popitem(last=False)
        elif token.expiry_ms <= now_ms():
            del self._verified[text]
            raise InvalidToken(f"the token expired at {token.expiry_ms}")
        credentials = self._credentials()
        if credentials is None or not credentials.has_user(token.owner):
            raise InvalidToken(f"user {token.owner!r} has no credentials (deleted?)")
        return token
