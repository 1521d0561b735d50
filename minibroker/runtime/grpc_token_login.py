"""A gRPC client without a certificate logs in with SCRAM (or PLAIN) and carries the token it
gets: `login` runs a broker's `Authenticate` exchange (minibroker.core.security.tokens says what
the token is), `TokenCredentials` is the gRPC call-credentials plugin that logs in on a channel's
first call, attaches `authorization: Bearer <token>` to every call, and logs in again a minute
before the token expires. One token serves every broker of the cluster.

The user, password and mechanism come from Kafka client properties (`--command-config`:
`sasl.mechanism`, `sasl.username`/`sasl.password` or `sasl.jaas.config`), as Kafka's tools take
them; the CA from `ssl.truststore.location`/`ssl.ca.location`."""

from __future__ import annotations

import queue
import secrets
import threading
import time
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.core.security.sasl import PLAIN, SaslAuthenticationFailed
from minibroker.core.security.scram import ScramClient, ScramMechanism
from minibroker.rpc import broker_pb2, broker_pb2_grpc

REFRESH_BEFORE_MS = 60_000
LOGIN_TIMEOUT_S = 15.0


class LoginFailed(Exception):
    """The broker refused the login (the message has its error code and reason)."""


@dataclass(frozen=True)
class SaslLogin:
    mechanism: str  # SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN
    username: str
    password: str


def _refused(answer: Any) -> LoginFailed:
    try:
        name = ErrorCode(answer.error_code).name
    except ValueError:
        name = str(answer.error_code)
    return LoginFailed(f"{name}: {answer.error_message}")


def login(channel: grpc.Channel, who: SaslLogin) -> broker_pb2.AuthenticateResponse:
    """The broker's last answer, with the token; LoginFailed if it refused."""
    outbox: queue.Queue[broker_pb2.AuthenticateRequest | None] = queue.Queue()

    def requests() -> Iterator[broker_pb2.AuthenticateRequest]:
        while (item := outbox.get()) is not None:
            yield item

    scram = ScramMechanism.for_name(who.mechanism)
    client = None
    if scram is not None:
        client = ScramClient(scram, who.username, who.password, secrets.token_urlsafe(18))
        first = client.first()
    elif who.mechanism == PLAIN:
        first = f"\0{who.username}\0{who.password}".encode()
    else:
        raise LoginFailed(f"sasl.mechanism {who.mechanism!r}: use SCRAM-SHA-256/512 or PLAIN")
    outbox.put(broker_pb2.AuthenticateRequest(mechanism=who.mechanism, sasl_token=first))
    stub = broker_pb2_grpc.BrokerStub(channel)
    step = 0
    try:
        for answer in stub.Authenticate(requests(), timeout=LOGIN_TIMEOUT_S):
            if answer.error_code:
                raise _refused(answer)
            if answer.access_token:
                if client is not None:
                    client.verify(answer.sasl_token)  # the broker knows the password too
                done: broker_pb2.AuthenticateResponse = answer
                return done
            if client is None or step > 0:
                raise LoginFailed("the broker asked for more than the mechanism sends")
            step += 1
            outbox.put(broker_pb2.AuthenticateRequest(sasl_token=client.final(answer.sasl_token)))
    except SaslAuthenticationFailed as exc:
        raise LoginFailed(f"SASL_AUTHENTICATION_FAILED: {exc}") from None
    finally:
        outbox.put(None)
    raise LoginFailed("the broker ended the exchange without a token")


class TokenCredentials(grpc.AuthMetadataPlugin):  # type: ignore[misc]
    """The call credentials of a token login (thread-safe: gRPC calls it from its threads)."""

    def __init__(self, who: SaslLogin, ca_pem: bytes) -> None:
        self.who = who
        self._tls = grpc.ssl_channel_credentials(root_certificates=ca_pem)
        self._lock = threading.Lock()
        self._token = ""
        self._expiry_ms = 0

    def token(self, address: str) -> str:
        """A token valid for a while yet, logging in at `address` when there is none."""
        with self._lock:
            if self._expiry_ms - time.time() * 1000 > REFRESH_BEFORE_MS:
                return self._token
            with grpc.secure_channel(address, self._tls) as channel:
                answer = login(channel, self.who)
            self._token, self._expiry_ms = answer.access_token, answer.expiry_ms
            return self._token

    def __call__(self, context: Any, callback: Any) -> None:
        address = urllib.parse.urlsplit(context.service_url).netloc
        try:
            token = self.token(address)
        except (LoginFailed, grpc.RpcError) as exc:
            callback((), LoginFailed(f"login as {self.who.username} at {address}: {_why(exc)}"))
            return
        callback((("authorization", f"Bearer {token}"),), None)


def _why(exc: Exception) -> str:
    if isinstance(exc, grpc.RpcError):
        return f"{exc.code().name}: {exc.details()}"
    return str(exc)
