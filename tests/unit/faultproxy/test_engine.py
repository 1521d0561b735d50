"""The proxy's data path on real loopback sockets: forwarding both ways, cut and heal, delay,
bandwidth, resets. Timings are asserted from below only (a loaded machine is only slower)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest

from minibroker.faultproxy.engine import FaultProxy
from minibroker.faultproxy.model import FaultRequest, LinkSpec
from minibroker.localcluster import free_ports

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(OSError):
        while data := await reader.read(1 << 20):
            writer.write(data)
            await writer.drain()
    writer.close()


@contextlib.asynccontextmanager
async def proxied_echo(up: bool = True) -> AsyncIterator[tuple[FaultProxy, int]]:
    """A proxy with one link, client->broker-1, to an echo server (none when not `up`)."""
    listen, target = free_ports(2)
    server = await asyncio.start_server(_echo, "127.0.0.1", target) if up else None
    proxy = FaultProxy([LinkSpec("client", "broker-1", listen, target)])
    await proxy.start()
    try:
        yield proxy, listen
    finally:
        await proxy.close()
        if server is not None:
            server.close()


async def connect(port: int) -> Streams:
    return await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)


async def roundtrip(streams: Streams, data: bytes) -> bytes:
    reader, writer = streams
    writer.write(data)
    await writer.drain()
    return await asyncio.wait_for(reader.readexactly(len(data)), 10)


async def stalls(reader: asyncio.StreamReader, for_s: float = 0.3) -> bool:
    try:
        await asyncio.wait_for(reader.read(1), for_s)
    except TimeoutError:
        return True
    return False


def run(test: Callable[[], Awaitable[None]]) -> None:
    asyncio.run(asyncio.wait_for(test(), 30))


def test_bytes_go_both_ways_unchanged_and_are_counted() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            streams = await connect(port)
            payload = os.urandom(3 << 20)
            sender = asyncio.ensure_future(roundtrip(streams, payload))
            assert await sender == payload
            view = proxy.views()[0]
            assert view.connections == 1 and view.accepted == 1
            assert view.forward_bytes == view.backward_bytes == len(payload)
            streams[1].close()

    run(test)


def test_a_cut_stalls_without_closing_and_heal_delivers_what_was_held() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            reader, writer = await connect(port)
            assert await roundtrip((reader, writer), b"before") == b"before"
            assert proxy.fault(FaultRequest("broker-1", cut=True)) == ["client->broker-1"]
            writer.write(b"during")
            await writer.drain()
            assert await stalls(reader)
            assert not writer.is_closing() and proxy.views()[0].connections == 1
            assert proxy.heal(None) == ["client->broker-1"]
            assert await asyncio.wait_for(reader.readexactly(6), 5) == b"during"
            writer.close()

    run(test)


def test_a_one_way_cut_holds_only_that_direction() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            reader, writer = await connect(port)
            await roundtrip((reader, writer), b"x")
            # The node does not hear back: its requests reach the echo server, answers wait.
            proxy.fault(FaultRequest("broker-1", direction="out", cut=True))
            writer.write(b"ping")
            await writer.drain()
            assert await stalls(reader)
            assert proxy.views()[0].forward_bytes == 5  # "x" and "ping" went through
            proxy.heal(FaultRequest("broker-1"))
            assert await asyncio.wait_for(reader.readexactly(4), 5) == b"ping"
            writer.close()

    run(test)


def test_a_connection_accepted_during_a_cut_is_reset_when_healed() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            proxy.fault(FaultRequest("broker-1", cut=True))
            reader, writer = await connect(port)  # accepted, as the kernel accepts it
            writer.write(b"hello")
            assert await stalls(reader)
            proxy.heal(None)
            # Its handshake never reached the target: a reset, then new ones work.
            with contextlib.suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(10), 5) == b""
            streams = await connect(port)
            assert await roundtrip(streams, b"again") == b"again"
            streams[1].close()

    run(test)


def test_delay_keeps_order_and_adds_at_least_the_delay_each_way() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            reader, writer = await connect(port)
            proxy.fault(FaultRequest("broker-1", delay_ms=100))
            started = time.monotonic()
            for i in range(50):
                writer.write(b"%03d," % i)
                await asyncio.sleep(0.002)  # separate chunks, each with its own arrival time
            got = await asyncio.wait_for(reader.readexactly(200), 10)
            assert got == b"".join(b"%03d," % i for i in range(50))
            assert time.monotonic() - started >= 0.2
            writer.close()

    run(test)


def test_heal_releases_delayed_bytes_at_once() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            reader, writer = await connect(port)
            proxy.fault(FaultRequest("broker-1", delay_ms=20_000))
            writer.write(b"slow")
            await asyncio.sleep(0.1)
            proxy.heal(None)
            assert await asyncio.wait_for(reader.readexactly(4), 10) == b"slow"
            writer.close()

    run(test)


def test_bandwidth_caps_throughput() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            streams = await connect(port)
            proxy.fault(FaultRequest("broker-1", direction="in", bandwidth=200_000))
            started = time.monotonic()
            assert await roundtrip(streams, b"z" * 300_000) == b"z" * 300_000
            # 300 kB at 200 kB/s after a burst of one piece (10 kB): at least 1.45 s.
            assert time.monotonic() - started >= 1.3
            proxy.heal(None)
            started = time.monotonic()
            await roundtrip(streams, b"z" * 300_000)
            assert time.monotonic() - started < 1.3  # an unthrottled link is far faster
            streams[1].close()

    run(test)


def test_reset_closes_connections_and_refuse_keeps_new_ones_out_until_healed() -> None:
    async def test() -> None:
        async with proxied_echo() as (proxy, port):
            reader, writer = await connect(port)
            await roundtrip((reader, writer), b"x")
            proxy.fault(FaultRequest("broker-1", reset=True, refuse=True))
            with pytest.raises((ConnectionResetError, asyncio.IncompleteReadError)):
                await roundtrip((reader, writer), b"y")
            reader, writer = await connect(port)
            with contextlib.suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(1), 5) == b""
            proxy.heal(None)
            streams = await connect(port)
            assert await roundtrip(streams, b"back") == b"back"
            streams[1].close()

    run(test)


def test_a_target_that_is_down_resets_the_client() -> None:
    async def test() -> None:
        async with proxied_echo(up=False) as (_, port):
            reader, _ = await connect(port)
            with contextlib.suppress(ConnectionResetError):
                assert await asyncio.wait_for(reader.read(1), 5) == b""

    run(test)


def test_a_port_in_use_fails_the_start_and_closes_the_rest() -> None:
    async def test() -> None:
        async with proxied_echo() as (_, port):
            free = free_ports(1)[0]
            clash = FaultProxy(
                [LinkSpec("client", "broker-2", free, 1), LinkSpec("client", "broker-3", port, 1)]
            )
            with pytest.raises(OSError):
                await clash.start()
            assert all(
                link.server is None or not link.server.is_serving() for link in clash.links.values()
            )

    run(test)
