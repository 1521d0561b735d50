"""The fault proxy's control port: one gRPC server with the control service (JSON in, JSON out,
no generated code), the Events service (so `minibroker events` shows net_fault/net_heal next to
the cluster's events) and standard health. Bad requests get INVALID_ARGUMENT and the reason.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from minibroker.faultproxy.engine import FaultProxy
from minibroker.faultproxy.model import HOST, SERVICE, FaultRequest, FaultRequestError
from minibroker.rpc import events_pb2_grpc
from minibroker.runtime import logging as slog
from minibroker.runtime.event_service import EventsServicer

# Links {} -> {"links": [LinkView]}; Fault FaultRequest -> {"links": [names]};
# Heal {node?, peers?, links?} (nothing: every link) -> {"links": [names that had a fault]}.
METHODS = ("Links", "Fault", "Heal")

Handler = Callable[[Any], dict[str, Any]]


def _heal_request(obj: Any) -> FaultRequest | None:
    if not isinstance(obj, dict):
        raise FaultRequestError("a request is a JSON object")
    unknown = set(obj) - {"node", "peers", "links"}
    if unknown:
        raise FaultRequestError(f"unknown heal fields: {sorted(unknown)}")
    if not obj.get("node") and not obj.get("links"):
        if obj.get("peers"):
            raise FaultRequestError("peers need a node")
        return None
    return FaultRequest.from_json(obj)


def handlers(proxy: FaultProxy) -> dict[str, Handler]:
    """The control methods on `proxy`: each takes the decoded JSON request."""
    return {
        "Links": lambda _: {"links": [v.to_json() for v in proxy.views()]},
        "Fault": lambda obj: {"links": proxy.fault(FaultRequest.from_json(obj))},
        "Heal": lambda obj: {"links": proxy.heal(_heal_request(obj))},
    }


def _method(handler: Handler) -> Callable[[bytes, Any], Awaitable[bytes]]:
    async def call(request: bytes, context: Any) -> bytes:
        try:
            obj = json.loads(request or b"{}")
            answer = handler(obj)
        except (json.JSONDecodeError, FaultRequestError) as exc:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        return json.dumps(answer).encode()

    return call


async def serve(proxy: FaultProxy, port: int) -> tuple[Any, int]:
    """Start the control server on HOST:port (0: any free port); (server, bound port). Health
    reports SERVING at once: the links listen before the server starts."""
    server = grpc.aio.server()
    methods = {
        name: grpc.unary_unary_rpc_method_handler(_method(h)) for name, h in handlers(proxy).items()
    }
    generic = grpc.method_handlers_generic_handler(SERVICE, methods)
    server.add_generic_rpc_handlers((generic,))
    events_pb2_grpc.add_EventsServicer_to_server(EventsServicer(slog.event_buffer()), server)
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    bound = server.add_insecure_port(f"{HOST}:{port}")
    if bound == 0:
        raise OSError(f"cannot listen on {HOST}:{port}")
    await server.start()
    for service in ("", SERVICE):
        await health.set(service, health_pb2.HealthCheckResponse.SERVING)
    return server, bound
