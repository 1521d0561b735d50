"""A follower's fetches to one leader on one long-lived FetchStream call (broker.proto): the
same requests and answers as unary Fetch, one outstanding at a time, without a call's setup and
teardown per round trip (about a third of gRPC's CPU per round trip on these machines,
bench/profiles/half-load.md). Opened on first use, and again after any failure."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc

from minibroker.rpc import broker_pb2


class FetchStreamError(Exception):
    """The stream failed without a gRPC status: no answer within the timeout, or ended."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FetchStream:
    def __init__(self, stub: Any) -> None:
        self._stub = stub
        self._call: Any = None

    async def fetch(
        self, request: broker_pb2.FetchRequest, timeout_s: float
    ) -> broker_pb2.FetchResponse:
        """The answer to `request`; raises grpc.aio.AioRpcError or FetchStreamError, after
        which the next fetch opens a new stream."""
        if self._call is None:
            self._call = self._stub.FetchStream()
        call = self._call
        try:
            await call.write(request)
            async with asyncio.timeout(timeout_s):
                response = await call.read()
        except TimeoutError:
            self.close()
            raise FetchStreamError("DEADLINE_EXCEEDED") from None
        except BaseException:
            self.close()
            raise
        if response is grpc.aio.EOF:
            self.close()
            raise FetchStreamError("STREAM_ENDED")
        assert isinstance(response, broker_pb2.FetchResponse)
        return response

    def close(self) -> None:
        if self._call is not None:
            self._call.cancel()
            self._call = None
