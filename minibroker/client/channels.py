"""One grpc.aio channel per broker address, reused by every call a client makes. The only
client module that touches grpc itself; gRPC failures leave it as `RpcFailure`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import grpc

from minibroker.client.errors import ClientError
from minibroker.rpc import broker_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime.grpc_options import (
    RECONNECT_BACKOFF_MAX_MS,
    RECONNECT_BACKOFF_MS,
    channel_options,
)

# Statuses that say the request itself is wrong or unsupported: retrying cannot help. Every
# other status (UNAVAILABLE, DEADLINE_EXCEEDED, ...) means the broker is down or unreachable.
_FATAL_STATUSES = frozenset(
    {
        "UNIMPLEMENTED",
        "INVALID_ARGUMENT",
        "RESOURCE_EXHAUSTED",
        "PERMISSION_DENIED",
        "UNAUTHENTICATED",
        "FAILED_PRECONDITION",
        "OUT_OF_RANGE",
    }
)


class RpcFailure(ClientError):
    """A call to a broker failed at the gRPC level (no Kafka answer came back)."""

    def __init__(self, address: str, status: str, details: str) -> None:
        super().__init__(f"broker {address}: {status}: {details}")
        self.address = address
        self.status = status
        self.details = details

    @property
    def retriable(self) -> bool:
        return self.status not in _FATAL_STATUSES


def parse_bootstrap(bootstrap: str | Sequence[str]) -> list[str]:
    """host:port addresses from "h1:p1,h2:p2" or a list of them, in order, without repeats."""
    items = bootstrap.split(",") if isinstance(bootstrap, str) else list(bootstrap)
    out: list[str] = []
    for raw in items:
        address = raw.strip()
        if not address:
            continue
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise ValueError(f"a broker address looks like host:port, got {address!r}")
        if address not in out:
            out.append(address)
    if not out:
        raise ValueError("no broker address given")
    return out


class ChannelPool:
    """Channels by address, created on first use inside the running event loop."""

    def __init__(
        self,
        *,
        reconnect_backoff_ms: int = RECONNECT_BACKOFF_MS,
        reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS,
    ):
        # Kafka's client backoff and keepalive pings (minibroker/runtime/grpc_options.py).
        self._options = channel_options(
            reconnect_backoff_ms=reconnect_backoff_ms,
            reconnect_backoff_max_ms=reconnect_backoff_max_ms,
        )
        self._channels: dict[str, Any] = {}
        self._stubs: dict[str, Any] = {}
        self._in_flight: dict[str, int] = {}

    def in_flight(self, address: str) -> int:
        """Calls to `address` awaiting an answer (Kafka picks the least loaded node by this)."""
        return self._in_flight.get(address, 0)

    def _stub(self, address: str) -> Any:
        stub = self._stubs.get(address)
        if stub is None:
            channel = grpc_security.aio_channel(address, options=self._options)
            self._channels[address] = channel
            stub = self._stubs[address] = broker_pb2_grpc.BrokerStub(channel)
        return stub

    async def call(self, address: str, method: str, request: Any, timeout_ms: int) -> Any:
        """`method` ("Produce", "Fetch", ...) on the broker at `address`; raises RpcFailure."""
        rpc = getattr(self._stub(address), method)
        self._in_flight[address] = self._in_flight.get(address, 0) + 1
        try:
            return await rpc(request, timeout=timeout_ms / 1000)
        except grpc.aio.AioRpcError as exc:
            raise RpcFailure(address, exc.code().name, exc.details() or "") from None
        finally:
            self._in_flight[address] -= 1

    async def close(self) -> None:
        channels = list(self._channels.values())
        self._channels.clear()
        self._stubs.clear()
        for channel in channels:
            await channel.close()
