"""The raw limit: how fast Python gRPC moves produce-sized payloads over loopback with no broker
behind it, the ceiling a Python gRPC broker can approach on this machine.

The server runs in its own process (client and server must not share a GIL) and answers through
generic handlers on raw bytes, so no .proto is involved. By default it answers each payload
with an 8-byte acknowledgement, as a produce response is small; `--echo` returns the payload.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import grpc

from bench.common import HOST, CpuMeter, Result, format_header, format_row, percentiles, spawn, stop
from minibroker.runtime.malloc_tuning import tune_malloc

ROOT = Path(__file__).resolve().parent.parent
SERVICE = "bench.Echo"
OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]
MODES = ("unary", "bidi", "client-stream")
RECORD_SIZES = (100, 1024)
BATCHES = (1, 100, 1000)
BIDI_WINDOW = 64

# The server's handlers. Requests and responses are bytes: no serializer on either side.
Reply = Callable[[bytes], bytes]


def _ack(payload: bytes) -> bytes:
    return len(payload).to_bytes(8, "big")


def _echo(payload: bytes) -> bytes:
    return payload


def _handler(reply: Reply) -> grpc.GenericRpcHandler:
    async def unary(request: bytes, context: Any) -> bytes:
        return reply(request)

    async def bidi(requests: AsyncIterator[bytes], context: Any) -> AsyncIterator[bytes]:
        async for request in requests:
            yield reply(request)

    async def client_stream(requests: AsyncIterator[bytes], context: Any) -> bytes:
        count = 0
        async for _ in requests:
            count += 1
        return count.to_bytes(8, "big")

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Bidi": grpc.stream_stream_rpc_method_handler(bidi),
            "ClientStream": grpc.stream_unary_rpc_method_handler(client_stream),
        },
    )


async def serve(echo: bool) -> None:
    """Serve on a free loopback port, print it on stdout, and exit when stdin closes (the
    benchmark stopped or died)."""
    server = grpc.aio.server(options=OPTIONS)
    server.add_generic_rpc_handlers((_handler(_echo if echo else _ack),))
    port = server.add_insecure_port(f"{HOST}:0")
    await server.start()
    print(port, flush=True)
    stdin_closed = asyncio.Event()
    loop = asyncio.get_running_loop()

    def wait_stdin() -> None:
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(stdin_closed.set)

    threading.Thread(target=wait_stdin, daemon=True).start()
    await stdin_closed.wait()
    await server.stop(grace=None)


class EchoServer:
    """The server process: `with EchoServer() as address:`; stopped by PID on exit."""

    def __init__(self, echo: bool = False) -> None:
        self.echo = echo
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> str:
        args = [sys.executable, "-m", "bench.raw_grpc", "--serve"] + (
            ["--echo"] if self.echo else []
        )
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        }
        self.proc = spawn(args, cwd=ROOT, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line.strip().isdigit():
            stop(self.proc)
            raise RuntimeError(f"the echo server did not start (exit code {self.proc.returncode})")
        return f"{HOST}:{int(line)}"

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            stop(self.proc)
            assert self.proc.stdout is not None
            self.proc.stdout.close()


async def _unary(
    channel: grpc.aio.Channel, payload: bytes, seconds: float, in_flight: int
) -> tuple[int, list[float], float]:
    call = channel.unary_unary(f"/{SERVICE}/Unary")
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def worker() -> None:
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            await call(payload, timeout=60)
            latencies.append((time.perf_counter() - sent) * 1000)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return len(latencies), latencies, time.perf_counter() - started


async def _bidi(
    channel: grpc.aio.Channel, payload: bytes, seconds: float, window: int
) -> tuple[int, list[float], float]:
    """One bidi stream, at most `window` messages unacknowledged; the server acks in order."""
    call = channel.stream_stream(f"/{SERVICE}/Bidi")(timeout=seconds + 60)
    free = asyncio.Semaphore(window)
    sent_at: list[float] = []
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def write() -> None:
        while time.perf_counter() < deadline:
            await free.acquire()
            sent_at.append(time.perf_counter())
            await call.write(payload)
        await call.done_writing()

    async def read() -> None:
        async for _ in call:
            latencies.append((time.perf_counter() - sent_at[len(latencies)]) * 1000)
            free.release()

    await asyncio.gather(write(), read())
    return len(latencies), latencies, time.perf_counter() - started


async def _client_stream(
    channel: grpc.aio.Channel, payload: bytes, seconds: float
) -> tuple[int, list[float], float]:
    """One client stream written as fast as flow control allows; one answer at its end."""
    call = channel.stream_unary(f"/{SERVICE}/ClientStream")(timeout=seconds + 60)
    started = time.perf_counter()
    deadline = started + seconds
    sent = 0
    while time.perf_counter() < deadline:
        await call.write(payload)
        sent += 1
    await call.done_writing()
    received = int.from_bytes(await call, "big")
    assert received == sent, (received, sent)
    return received, [], time.perf_counter() - started


async def measure(
    address: str,
    mode: str,
    record_bytes: int,
    records_per_message: int,
    seconds: float,
    in_flight: int,
) -> Result:
    """One case: `mode` with payloads of `record_bytes * records_per_message` bytes."""
    payload = b"v" * (record_bytes * records_per_message)
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as channel:
        async with asyncio.timeout(10):
            await channel.channel_ready()
        if mode == "unary":
            messages, latencies, elapsed = await _unary(channel, payload, seconds, in_flight)
        elif mode == "bidi":
            messages, latencies, elapsed = await _bidi(channel, payload, seconds, BIDI_WINDOW)
        elif mode == "client-stream":
            messages, latencies, elapsed = await _client_stream(channel, payload, seconds)
        else:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    p50, p99, p999 = percentiles(latencies)
    label = f"{mode} x{in_flight}" if mode == "unary" else mode
    return Result(
        "raw gRPC", label, record_bytes, records_per_message, messages, elapsed, p50, p99, p999
    )


def run(
    seconds: float = 3.0,
    in_flight: int = 8,
    modes: Sequence[str] = MODES,
    record_sizes: Sequence[int] = RECORD_SIZES,
    batches: Sequence[int] = BATCHES,
    echo: bool = False,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Every case against one echo server process; `on_result` sees each row as it lands."""
    results: list[Result] = []
    server = EchoServer(echo)
    with server as address:
        assert server.proc is not None
        meter = CpuMeter([server.proc.pid, os.getpid()])
        for record_bytes in record_sizes:
            for batch in batches:
                for mode in modes:
                    meter.start()
                    result = asyncio.run(
                        measure(address, mode, record_bytes, batch, seconds, in_flight)
                    )
                    result = dataclasses.replace(result, cpu_s=meter.stop())
                    results.append(result)
                    if on_result is not None:
                        on_result(result)
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=3.0, help="per case (default 3)")
    parser.add_argument("--in-flight", type=int, default=8, help="concurrent unary calls")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    parser.add_argument("--echo", action="store_true", help="answer with the payload, not an ack")


def main(args: argparse.Namespace) -> list[Result]:
    reply = "the payload echoed" if args.echo else "an 8-byte ack"
    print(
        f"raw gRPC: server process on {HOST}, {reply} per message; unary with {args.in_flight} "
        f"calls in flight, bidi with {BIDI_WINDOW} unacknowledged, {args.seconds:g} s per row",
        flush=True,
    )
    print(format_header(), flush=True)
    return run(
        seconds=args.seconds,
        in_flight=args.in_flight,
        modes=args.modes,
        echo=args.echo,
        on_result=lambda r: print(format_row(r), flush=True),
    )


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        # Started in its own process group: the terminal's Ctrl-C reaches the benchmark only,
        # which then closes this server's stdin.
        tune_malloc()  # as the brokers do: the ceiling is measured with the same allocator
        asyncio.run(serve(echo="--echo" in sys.argv))
    else:
        parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
        add_arguments(parser)
        main(parser.parse_args())
