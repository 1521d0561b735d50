"""The door of a TLS gRPC listener for token-carrying calls: a call whose `authorization: Bearer`
token is not valid now (forged, expired, its owner deleted) is answered UNAUTHENTICATED with
the reason and an `authentication_failed` event before any handler runs, so a client learns to
log in again instead of seeing its requests denied as someone else's. A call without a token
passes (its certificate, or User:ANONYMOUS, is who it is)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from broker.security.grpc_tokens import TokenAuthority
from minibroker.core.security.tokens import InvalidToken
from minibroker.runtime import logging as slog


def _refuse(handler: grpc.RpcMethodHandler, why: str) -> grpc.RpcMethodHandler:
    """A handler of the same kind as `handler` that answers UNAUTHENTICATED."""

    async def unary(_request: Any, context: Any) -> Any:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, why)

    async def streaming(_request: Any, context: Any) -> AsyncIterator[Any]:
        await context.abort(grpc.StatusCode.UNAUTHENTICATED, why)
        yield  # pragma: no cover - abort raises

    kinds = {
        (False, False): grpc.unary_unary_rpc_method_handler,
        (False, True): grpc.unary_stream_rpc_method_handler,
        (True, False): grpc.stream_unary_rpc_method_handler,
        (True, True): grpc.stream_stream_rpc_method_handler,
    }
    make = kinds[(handler.request_streaming, handler.response_streaming)]
    return make(
        streaming if handler.response_streaming else unary,
        request_deserializer=None,  # the request is never read
        response_serializer=handler.response_serializer,
    )


class TokenGate(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    def __init__(self, authority: TokenAuthority, listener: str) -> None:
        self.authority = authority
        self.listener = listener

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: Any,
    ) -> grpc.RpcMethodHandler | None:
        handler = await continuation(handler_call_details)
        if handler is None:
            return None
        try:
            self.authority.caller(handler_call_details.invocation_metadata)
        except InvalidToken as exc:
            slog.event(
                "authentication_failed", logging.INFO, listener=self.listener,
                method=handler_call_details.method, reason=str(exc),
            )  # fmt: skip
            return _refuse(handler, f"SASL_AUTHENTICATION_FAILED: {exc}")
        return handler
