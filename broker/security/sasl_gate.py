"""What a SASL_PLAINTEXT or SASL_SSL Kafka connection answers before it is authenticated
(Kafka's SaslServerAuthenticator, rules in `minibroker.core.security.sasl`): ApiVersions, then
SaslHandshake, then SaslAuthenticate requests (handshake v1) or raw tokens (v0). Anything else,
a malformed token or a failed exchange closes the connection, after Kafka's answer where Kafka
sends one. Frames are capped at 512 KiB until then (MAX_RECEIVE_SIZE)."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.sasl import SaslAuthenticateResponse, SaslHandshakeResponse

from broker.kafka.framing import frame
from broker.kafka.protocol import APIS, decode_request, encode_response, peek_header
from broker.security.credentials import CredentialCache
from minibroker.core.errors import ErrorCode
from minibroker.core.security.sasl import (
    PLAIN,
    IllegalSaslState,
    MechanismServer,
    PlainServer,
    SaslAuthenticationFailed,
    SaslServerSession,
    SaslState,
    UnsupportedSaslMechanism,
)
from minibroker.core.security.scram import ScramMechanism, ScramServer
from minibroker.runtime import logging as slog


class SaslClose(Exception):
    """Close the connection (after sending `answer`, if any); the message says why."""

    def __init__(self, reason: str, answer: bytes | None = None) -> None:
        super().__init__(reason)
        self.answer = answer


@dataclass
class GateAnswer:
    answer: bytes | None
    principal: str | None  # set once authentication completed


def mechanism_servers(
    credentials: CredentialCache,
) -> Callable[[str], MechanismServer]:
    def make(mechanism: str) -> MechanismServer:
        scram = ScramMechanism.for_name(mechanism)
        if scram is not None:
            return ScramServer(
                scram,
                lambda user: credentials.scram(scram, user),
                secrets.token_urlsafe(24),
            )
        if mechanism == PLAIN:
            return PlainServer(credentials.check_password)
        raise UnsupportedSaslMechanism(f"Unsupported SASL mechanism {mechanism}")

    return make


class SaslGate:
    def __init__(
        self,
        enabled: tuple[str, ...],
        credentials: CredentialCache,
        api_versions: Callable[[ErrorCode], Any],
        listener: str,
        peer: str,
    ) -> None:
        self.session = SaslServerSession(enabled, mechanism_servers(credentials))
        self._api_versions = api_versions
        self.listener = listener
        self.peer = peer

    @property
    def complete(self) -> bool:
        return self.session.state is SaslState.COMPLETE

    async def answer(self, payload: bytes) -> GateAnswer:
        """The answer to one frame before authentication; SaslClose to close."""
        if self.session.state is SaslState.AUTHENTICATE and self.session.raw_tokens:
            return await self._raw_token(payload)
        start = peek_header(payload)
        try:
            self.session.admit(start.api_key)
        except IllegalSaslState as exc:
            raise SaslClose(str(exc)) from None
        api = APIS[start.api_key]
        if not api.supports(start.api_version):
            if api.key == ApiKey.ApiVersions:
                refusal = self._api_versions(ErrorCode.UNSUPPORTED_VERSION)
                return GateAnswer(encode_response(api, 0, start.correlation_id, refusal), None)
            raise SaslClose(f"{api.key.name} v{start.api_version} is not served")
        request = decode_request(api, start.api_version, payload)
        cid, version = start.correlation_id, start.api_version
        if api.key == ApiKey.ApiVersions:
            self.session.api_versions_answered()
            answer = self._api_versions(ErrorCode.NONE)
            return GateAnswer(encode_response(api, version, cid, answer), None)
        if api.key == ApiKey.SaslHandshake:
            return self._handshake(api, version, cid, str(request.mechanism))
        return await self._authenticate(api, version, cid, bytes(request.auth_bytes or b""))

    def _handshake(self, api: Any, version: int, cid: int, mechanism: str) -> GateAnswer:
        enabled = list(self.session.enabled)
        try:
            self.session.handshake(mechanism, version)
        except UnsupportedSaslMechanism as exc:
            refusal = SaslHandshakeResponse(
                error_code=int(ErrorCode.UNSUPPORTED_SASL_MECHANISM), mechanisms=enabled
            )
            self._failed(str(exc), mechanism)
            raise SaslClose(str(exc), encode_response(api, version, cid, refusal)) from None
        ok = SaslHandshakeResponse(error_code=0, mechanisms=enabled)
        return GateAnswer(encode_response(api, version, cid, ok), None)

    async def _evaluate(self, token: bytes) -> bytes:
        """The mechanism's answer. PLAIN derives the password's key (PBKDF2, ~2 ms at 4096
        iterations): off the loop, so a flood of logins cannot stall the broker. SCRAM's
        server side is two HMACs: on the loop. One request at a time per connection, so the
        session is never touched by two threads at once."""
        if self.session.mechanism == PLAIN:
            return await asyncio.to_thread(self.session.authenticate, token)
        return self.session.authenticate(token)

    async def _authenticate(self, api: Any, version: int, cid: int, token: bytes) -> GateAnswer:
        try:
            reply = await self._evaluate(token)
        except (SaslAuthenticationFailed, IllegalSaslState) as exc:
            message = str(exc)
            refusal = SaslAuthenticateResponse(
                error_code=int(ErrorCode.SASL_AUTHENTICATION_FAILED),
                error_message=message, auth_bytes=b"", session_lifetime_ms=0,
            )  # fmt: skip
            self._failed(message, self.session.mechanism)
            raise SaslClose(message, encode_response(api, version, cid, refusal)) from None
        ok = SaslAuthenticateResponse(
            error_code=0, error_message=None, auth_bytes=reply, session_lifetime_ms=0
        )
        return GateAnswer(encode_response(api, version, cid, ok), self._maybe_done())

    async def _raw_token(self, token: bytes) -> GateAnswer:
        try:
            reply = await self._evaluate(token)
        except (SaslAuthenticationFailed, IllegalSaslState) as exc:
            self._failed(str(exc), self.session.mechanism)
            raise SaslClose(str(exc)) from None  # v0: Kafka closes without an answer
        # Kafka sends the mechanism's answer as it is, an empty one (PLAIN's) as size 0.
        return GateAnswer(frame(reply), self._maybe_done())

    def _maybe_done(self) -> str | None:
        principal = self.session.principal
        if principal is not None:
            slog.event(
                "client_authenticated", logging.DEBUG, listener=self.listener, peer=self.peer,
                principal=principal, mechanism=self.session.mechanism,
            )  # fmt: skip
        return principal

    def _failed(self, reason: str, mechanism: str | None) -> None:
        slog.event(
            "authentication_failed", logging.INFO, listener=self.listener, peer=self.peer,
            mechanism=mechanism, reason=reason,
        )  # fmt: skip
