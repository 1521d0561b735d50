"""What the fault proxy costs: produce throughput and latency of a 3-broker cluster, RF 3, with
every link direct and with every link through the (unfaulted) fault proxy.

    .venv/bin/python bench/faultproxy.py [--seconds 3] [--in-flight 8]

For acks=1 and acks=all, 100-byte records in pre-built batches of 1, 100 and 1000, one client
process with a fixed number of requests in flight to partition 0's leader (through its client
link when proxied; followers fetch through their broker links). Then the proxy alone: one
connection echoing 64 MiB through a link, and 100-byte round trips, next to the same direct.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import grpc

from minibroker import localcluster
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition
from minibroker.faultproxy.engine import FaultProxy
from minibroker.faultproxy.model import LinkSpec
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.waiting import wait_until

TOPIC = "bench"
OPTIONS = [("grpc.max_send_message_length", 64 << 20)]


async def run_load(
    address: str, request: Any, seconds: float, in_flight: int
) -> tuple[list[float], int]:
    """Latencies (ms) of the requests acknowledged in `seconds` with `in_flight` outstanding,
    and how many failed (an overloaded machine can shrink the ISR below min.insync.replicas)."""
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)

        async def worker() -> None:
            nonlocal errors
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await stub.Produce(request, timeout=60)
                if response.responses[0].partitions[0].error_code != 0:
                    errors += 1
                    continue
                latencies.append((time.perf_counter() - started) * 1000)

        await asyncio.gather(*(worker() for _ in range(in_flight)))
    return latencies, errors


def produce_rows(proxy: bool, seconds: float, in_flight: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "cluster"
        state = localcluster.up(d, controllers=1, proxy=proxy)
        try:
            cli = [sys.executable, "-m", "minibroker.cli.main"]
            subprocess.run(
                [*cli, "topics", "create", TOPIC, "--partitions", "1", "--replication-factor",
                 "3", "--config", "min.insync.replicas=2", "--wait", "--dir", str(d)],
                check=True, capture_output=True,
            )  # fmt: skip
            with localcluster.zk_session(state.zk_connect) as zk:
                got = wait_until(
                    lambda: zk.read_partition_state(TopicPartition(TOPIC, 0)),
                    timeout_s=30,
                    what="a leader",
                )
            leader = state.process(f"broker-{got.leader}").address
            proxy_info = state.fault_proxy()
            cpu_before = _cpu_s(proxy_info.pid) if proxy_info else 0.0
            started = time.monotonic()
            for batch in (1, 100, 1000):
                data = build_batch(
                    [NewRecord(None, b"v" * 100)] * batch, base_timestamp=int(time.time() * 1000)
                )
                for acks in (1, -1):
                    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=30_000)
                    request.topics.add(name=TOPIC).partitions.add(partition_index=0, records=data)
                    lat, errors = asyncio.run(run_load(leader, request, seconds, in_flight))
                    records = len(lat) * batch / seconds
                    p99 = statistics.quantiles(lat, n=100)[98] if len(lat) >= 100 else max(lat)
                    label = f"{'proxy' if proxy else 'direct'} acks={'all' if acks < 0 else 1}"
                    print(
                        f"{label:<16} {batch:>6} {records:>12,.0f} {records * 100 / 1e6:>8.1f} "
                        f"{statistics.median(lat):>9.2f} {p99:>9.2f} {errors:>7}",
                        flush=True,
                    )
            if proxy_info is not None:
                busy = (_cpu_s(proxy_info.pid) - cpu_before) / (time.monotonic() - started)
                print(f"the proxy process used {busy:.0%} of one core during these rows")
        finally:
            localcluster.down(state)


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while data := await reader.read(1 << 20):
        writer.write(data)
        await writer.drain()
    writer.close()


async def raw_link() -> None:
    listen, target = localcluster.free_ports(2)
    server = await asyncio.start_server(_echo, "127.0.0.1", target)
    proxy = FaultProxy([LinkSpec("client", "broker-1", listen, target)])
    await proxy.start()
    for label, port in (("proxy", listen), ("direct", target)):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, limit=1 << 20)
        payload = os.urandom(64 << 20)
        started = time.perf_counter()
        writer.write(payload)
        got = 0
        while got < len(payload):
            got += len(await reader.read(1 << 20))
        mib_s = 64 / (time.perf_counter() - started)
        rtts = []
        for _ in range(500):
            started = time.perf_counter()
            writer.write(b"x" * 100)
            await reader.readexactly(100)
            rtts.append((time.perf_counter() - started) * 1e6)
        writer.close()
        await writer.wait_closed()
        await asyncio.sleep(0.1)  # the echo handler sees the EOF and ends before the loop does
        print(f"{label:<7} echo {mib_s:6.0f} MiB/s each way   100-byte round trip p50 "
              f"{statistics.median(rtts):5.0f} us")  # fmt: skip
    await proxy.close()
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--in-flight", type=int, default=8)
    args = parser.parse_args()
    print(f"3 brokers, RF 3, min.insync.replicas 2, {args.in_flight} requests in flight, "
          f"{args.seconds:g} s per row, 100-byte records")  # fmt: skip
    print(f"{'links':<16} {'batch':>6} {'records/s':>12} {'MB/s':>8} {'p50 ms':>9} {'p99 ms':>9} "
          f"{'errors':>7}")  # fmt: skip
    for proxy in (False, True):
        produce_rows(proxy, args.seconds, args.in_flight)
    asyncio.run(raw_link())


if __name__ == "__main__":
    main()
