"""A connection that stops answering is closed by keepalive pings, not kept until each call's
deadline (minibroker/runtime/grpc_options.py): a real gRPC server in another process, with the
servers' options, and a client channel with the nodes' options.

Found on the compose cluster: a broker cut from its network and reconnected (a new address)
kept fetching on its dead connection and never rejoined the ISR."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from minibroker.runtime.grpc_options import KEEPALIVE_TIME_MS, KEEPALIVE_TIMEOUT_MS, channel_options

pytestmark = pytest.mark.integration

SERVER = textwrap.dedent(
    """
    import asyncio, sys
    import grpc
    from grpc_health.v1 import health_pb2_grpc
    from grpc_health.v1._async import HealthServicer
    from minibroker.runtime.grpc_options import server_options

    async def main():
        server = grpc.aio.server(options=server_options())
        health_pb2_grpc.add_HealthServicer_to_server(HealthServicer(), server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()

    asyncio.run(main())
    """
)
DEADLINE_S = 60.0  # far beyond keepalive: only a closed connection ends the call sooner


async def _watch(port: int, server: subprocess.Popen[str]) -> None:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}", options=channel_options()) as ch:
        stub = health_pb2_grpc.HealthStub(ch)
        call = stub.Watch(health_pb2.HealthCheckRequest(service=""), timeout=DEADLINE_S)
        first = await call.read()
        assert first.status == health_pb2.HealthCheckResponse.SERVING
        # Idle for several ping intervals: the server accepts the pings (no GOAWAY).
        nxt = asyncio.ensure_future(call.read())
        done, _ = await asyncio.wait({nxt}, timeout=3 * KEEPALIVE_TIME_MS / 1000)
        assert not done, f"the idle stream ended: {nxt.exception() or nxt.result()}"
        # The server stops answering anything (SIGSTOP): the pings go unanswered.
        os.kill(server.pid, signal.SIGSTOP)
        try:
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await nxt
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert info.value.code() == grpc.StatusCode.UNAVAILABLE, info.value


def test_keepalive_closes_a_connection_whose_peer_stopped_answering() -> None:
    assert KEEPALIVE_TIME_MS + KEEPALIVE_TIMEOUT_MS < DEADLINE_S * 1000 / 4
    server = subprocess.Popen(
        [sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        asyncio.run(_watch(port, server))
    finally:
        server.kill()
        server.wait(timeout=10)
