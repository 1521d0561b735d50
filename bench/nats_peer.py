"""The peer: a 3-node NATS JetStream cluster on loopback with an R3 stream, published to by one
Python client (nats-py) with the same record sizes as minibroker's produce benchmark.

It installs nothing: it needs Debian's `nats-server` on PATH and `nats-py` (the `bench` extra).
Servers are started from config files in a temporary directory and stopped by PID on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.common import (
    HOST,
    MissingDependency,
    Result,
    format_header,
    format_row,
    free_ports,
    percentiles,
    spawn,
    stop,
)

NODES = 3
STREAM = "BENCH"
SUBJECT = "bench.records"
RECORD_SIZES = (100, 1024)
MODES = ("sync", "async")
READY_TIMEOUT_S = 30.0


def nats_server_or_raise() -> str:
    path = shutil.which("nats-server")
    if path is None:
        raise MissingDependency(
            "nats-server is not installed: `apt-get install -y nats-server` (Debian's package)"
        )
    return path


def nats_client_or_raise() -> Any:
    try:
        import nats
    except ImportError:
        raise MissingDependency(
            "nats-py is not installed: `.venv/bin/pip install -e '.[bench]'` "
            "(or `pip install nats-py`)"
        ) from None
    return nats


@dataclass(frozen=True)
class Node:
    name: str
    client_port: int
    cluster_port: int


def node_config(node: Node, nodes: Sequence[Node], store_dir: Path) -> str:
    """nats-server's configuration for one member of the cluster (routes to every member)."""
    routes = ", ".join(f"nats-route://{HOST}:{n.cluster_port}" for n in nodes)
    return (
        f"server_name: {node.name}\n"
        f"listen: {HOST}:{node.client_port}\n"
        f'jetstream {{ store_dir: "{store_dir}" }}\n'
        f"cluster {{\n"
        f"  name: bench\n"
        f"  listen: {HOST}:{node.cluster_port}\n"
        f"  routes: [{routes}]\n"
        f"}}\n"
    )


class JetStreamCluster:
    """`with JetStreamCluster() as cluster:` three nats-server processes in a temporary
    directory; on exit each is stopped by its PID and the directory removed."""

    def __init__(self) -> None:
        self.binary = nats_server_or_raise()
        ports = free_ports(2 * NODES)
        self.nodes = [Node(f"n{i + 1}", ports[2 * i], ports[2 * i + 1]) for i in range(NODES)]
        self.procs: list[subprocess.Popen[bytes]] = []
        self.dir: tempfile.TemporaryDirectory[str] | None = None

    @property
    def urls(self) -> list[str]:
        return [f"nats://{HOST}:{n.client_port}" for n in self.nodes]

    def url_of(self, server_name: str) -> str:
        return next(f"nats://{HOST}:{n.client_port}" for n in self.nodes if n.name == server_name)

    def logs(self) -> str:
        assert self.dir is not None
        out = []
        for node in self.nodes:
            log = Path(self.dir.name) / f"{node.name}.log"
            if log.exists():
                tail = log.read_text(errors="replace").splitlines()[-10:]
                out.append(f"--- {node.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def __enter__(self) -> JetStreamCluster:
        self.dir = tempfile.TemporaryDirectory(prefix="bench-nats-")
        try:
            root = Path(self.dir.name)
            for node in self.nodes:
                conf = root / f"{node.name}.conf"
                conf.write_text(node_config(node, self.nodes, root / node.name))
                with open(root / f"{node.name}.log", "wb") as log:
                    self.procs.append(spawn([self.binary, "-c", str(conf)], stdout=log, stderr=log))
        except BaseException:
            self.__exit__()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        for proc in self.procs:
            stop(proc)
        self.procs.clear()
        if self.dir is not None:
            self.dir.cleanup()
            self.dir = None


async def _quiet(error: Exception) -> None:
    # nats-py prints a traceback for every failed connection attempt unless given a callback;
    # failures that matter surface as exceptions from the calls themselves.
    pass


async def create_stream_when_ready(cluster: JetStreamCluster) -> str:
    """Create the R3 stream as soon as the cluster accepts it (the JetStream meta leader is
    elected and every peer is known); return the name of the server that leads the stream."""
    nats = nats_client_or_raise()
    from nats.js.api import StreamConfig

    deadline = time.monotonic() + READY_TIMEOUT_S
    last_error: BaseException | None = None
    while time.monotonic() < deadline:
        try:
            nc = await nats.connect(
                servers=cluster.urls,
                connect_timeout=1,
                max_reconnect_attempts=0,
                error_cb=_quiet,
            )
        except Exception as e:  # the servers are still starting
            last_error = e
            await asyncio.sleep(0.2)
            continue
        try:
            js = nc.jetstream(timeout=2)
            config = StreamConfig(name=STREAM, subjects=[SUBJECT], num_replicas=NODES)
            info = await js.add_stream(config)
            if info.cluster is not None and info.cluster.leader:
                followers = len(info.cluster.replicas or [])
                assert followers == NODES - 1, f"the stream has {followers} followers"
                return str(info.cluster.leader)
        except Exception as e:  # no meta leader yet, or not enough peers
            last_error = e
            await asyncio.sleep(0.3)
        finally:
            await nc.close()
    raise RuntimeError(
        f"the JetStream cluster did not accept an R3 stream within {READY_TIMEOUT_S:g} s "
        f"(last error: {last_error!r})\n{cluster.logs()}"
    )


async def measure(url: str, mode: str, record_bytes: int, seconds: float, window: int) -> Result:
    """One case: publish `record_bytes`-byte messages for `seconds`, each acknowledged by the R3
    stream; "sync" awaits every ack, "async" keeps up to `window` acks pending."""
    nats = nats_client_or_raise()
    payload = b"v" * record_bytes
    latencies: list[float] = []
    nc = await nats.connect(servers=[url], error_cb=_quiet)
    try:
        js = nc.jetstream(timeout=30, publish_async_max_pending=window)
        started = time.perf_counter()
        deadline = started + seconds
        if mode == "sync":
            while time.perf_counter() < deadline:
                sent = time.perf_counter()
                await js.publish(SUBJECT, payload)
                latencies.append((time.perf_counter() - sent) * 1000)
        elif mode == "async":
            errors: list[BaseException] = []

            def acked(sent: float) -> Callable[[asyncio.Future[Any]], None]:
                def done(future: asyncio.Future[Any]) -> None:
                    if future.cancelled() or future.exception() is not None:
                        errors.append(future.exception() or asyncio.CancelledError())
                    else:
                        latencies.append((time.perf_counter() - sent) * 1000)

                return done

            while time.perf_counter() < deadline:
                sent = time.perf_counter()
                future = await js.publish_async(SUBJECT, payload, wait_stall=30)
                future.add_done_callback(acked(sent))
            async with asyncio.timeout(60):
                await js.publish_async_completed()
            if errors:
                raise RuntimeError(f"{len(errors)} async publishes failed, first: {errors[0]!r}")
        else:
            raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
        elapsed = time.perf_counter() - started
    finally:
        await nc.close()
    p50, p99, p999 = percentiles(latencies)
    label = "publish sync" if mode == "sync" else f"publish async {window}"
    return Result("NATS R3", label, record_bytes, 1, len(latencies), elapsed, p50, p99, p999)


def run(
    seconds: float = 3.0,
    window: int = 256,
    modes: Sequence[str] = MODES,
    record_sizes: Sequence[int] = RECORD_SIZES,
    on_result: Callable[[Result], None] | None = None,
) -> list[Result]:
    """Every case against one fresh cluster, connected to the stream leader's server (as
    minibroker's producer talks to the partition leader)."""
    nats_client_or_raise()
    results: list[Result] = []
    with JetStreamCluster() as cluster:
        leader = asyncio.run(create_stream_when_ready(cluster))
        url = cluster.url_of(leader)
        for record_bytes in record_sizes:
            for mode in modes:
                result = asyncio.run(measure(url, mode, record_bytes, seconds, window))
                results.append(result)
                if on_result is not None:
                    on_result(result)
    return results


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=3.0, help="per case (default 3)")
    parser.add_argument("--window", type=int, default=256, help="pending acks for async publish")
    parser.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))


def main(args: argparse.Namespace) -> list[Result]:
    nats_server_or_raise()
    nats_client_or_raise()
    print(
        f"NATS JetStream: {NODES} nats-server processes on {HOST}, stream {STREAM} with "
        f"{NODES} replicas (file storage), one client on the stream leader, "
        f"{args.seconds:g} s per row",
        flush=True,
    )
    print(format_header(), flush=True)
    return run(
        seconds=args.seconds,
        window=args.window,
        modes=args.modes,
        on_result=lambda r: print(format_row(r), flush=True),
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    main(parser.parse_args())
