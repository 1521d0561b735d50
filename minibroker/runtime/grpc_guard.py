"""The door every gRPC request of a broker or controller passes: bytes that do not parse as the
method's request get INVALID_ARGUMENT, and an exception a handler lets escape gets INTERNAL with
a `request_failed` event, instead of gRPC's bare UNKNOWN; a method the server's servicer does
not implement (a controller asked for LeaderAndIsr) is UNIMPLEMENTED.

Without it grpcio answers an undecodable request with a status and message of its own and logs
a traceback; with it a hostile client learns exactly what was wrong and nothing reaches a
handler. Handlers still answer Kafka error codes for requests that parse but make no sense.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.runtime import logging as slog

Deserializer = Callable[[bytes], Any]


class _Undecodable:
    """What the guarded deserializer hands on instead of raising."""

    def __init__(self, why: str) -> None:
        self.why = why


def _safe(deserializer: Deserializer | None) -> Deserializer:
    def deserialize(data: bytes) -> Any:
        if deserializer is None:
            return data
        try:
            return deserializer(data)
        except Exception as exc:  # protobuf's DecodeError, or anything a parser raises
            return _Undecodable(f"{type(exc).__name__}: {exc}")

    return deserialize


def _message(method: str, why: str) -> str:
    code = ErrorCode.INVALID_REQUEST
    return f"{code.name} ({int(code)}): the request to {method} does not parse: {why}"


def _failed(method: str, exc: BaseException) -> str:
    slog.event("request_failed", logging.ERROR, request=method, error=repr(exc), exc_info=True)
    return f"{ErrorCode.UNKNOWN_SERVER_ERROR.name}: {type(exc).__name__} in {method}"


def _guard_unary(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    inner: Callable[[Any, Any], Awaitable[Any]] = handler.unary_unary

    async def unary(request: Any, context: Any) -> Any:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(method, request.why))
        try:
            return await inner(request, context)
        except (grpc.aio.AbortError, grpc.aio.UsageError):
            raise
        except NotImplementedError:  # the generated base class: a method this server lacks
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not served here")
        except Exception as exc:
            await context.abort(grpc.StatusCode.INTERNAL, _failed(method, exc))

    return grpc.unary_unary_rpc_method_handler(
        unary,
        request_deserializer=_safe(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


async def _relay(method: str, answers: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
    """A streaming handler's answers; an exception it lets escape becomes INTERNAL."""
    try:
        async for item in answers:
            yield item
    except (grpc.aio.AbortError, grpc.aio.UsageError):
        raise
    except Exception as exc:
        await context.abort(grpc.StatusCode.INTERNAL, _failed(method, exc))


def _guard_stream(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    inner: Callable[[Any, Any], AsyncIterator[Any]] = handler.unary_stream

    async def stream(request: Any, context: Any) -> AsyncIterator[Any]:
        if isinstance(request, _Undecodable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(method, request.why))
        async for item in _relay(method, inner(request, context), context):
            yield item

    return grpc.unary_stream_rpc_method_handler(
        stream,
        request_deserializer=_safe(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


def _guard_bidi(method: str, handler: grpc.RpcMethodHandler) -> grpc.RpcMethodHandler:
    inner: Callable[[Any, Any], AsyncIterator[Any]] = handler.stream_stream

    async def checked(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for request in requests:
            if isinstance(request, _Undecodable):  # the stream ends: its order is lost
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, _message(method, request.why))
            yield request

    async def bidi(requests: AsyncIterator[Any], context: Any) -> AsyncIterator[Any]:
        async for item in _relay(method, inner(checked(requests, context), context), context):
            yield item

    return grpc.stream_stream_rpc_method_handler(
        bidi,
        request_deserializer=_safe(handler.request_deserializer),
        response_serializer=handler.response_serializer,
    )


class RequestGuard(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Wraps each method's handler once, the first time the method is called. One guard per
    server: it keeps that server's handlers (a broker's listeners each have their own)."""

    def __init__(self) -> None:
        self._guarded: dict[str, grpc.RpcMethodHandler | None] = {}

    async def intercept_service(
        self,
        continuation: Callable[[Any], Awaitable[grpc.RpcMethodHandler | None]],
        handler_call_details: Any,
    ) -> grpc.RpcMethodHandler | None:
        method: str = handler_call_details.method
        if method in self._guarded:
            return self._guarded[method]
        handler = await continuation(handler_call_details)
        guarded = handler
        if handler is not None and not handler.request_streaming:
            if handler.unary_unary is not None:
                guarded = _guard_unary(method, handler)
            elif handler.unary_stream is not None:
                guarded = _guard_stream(method, handler)
        elif handler is not None and handler.stream_stream is not None:
            guarded = _guard_bidi(method, handler)
        if handler is not None:  # unknown methods are looked up again (gRPC: UNIMPLEMENTED)
            self._guarded[method] = guarded
        return guarded
