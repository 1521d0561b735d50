"""Produce throughput and latency against a real 3-broker cluster, RF 3, next to the raw gRPC
limit of the same requests measured in the same run.

    .venv/bin/python bench/produce.py [--seconds 3] [--in-flight 8]

For acks=1 and acks=all (-1), with 100-byte records in batches of 1, 100 and 1000, one client
process sends pre-built batches (the client's encoding is not measured) with a fixed number of
requests in flight to partition 0's leader and reports records/s, MB/s and p50/p99 latency.
"Raw gRPC" sends the same requests to a server that answers Produce without doing anything:
the single-hop ceiling of Python gRPC on this machine.
"""

from __future__ import annotations

import argparse
import asyncio
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
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.zk_store import ZkStore

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
# Until the controller issue lands, topics are created by the tests' controller stand-in.
from tests.integration.controller_helper import FakeController  # noqa: E402

TOPIC = "bench"
OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]


class NullBroker(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    async def Produce(self, request: Any, context: Any) -> broker_pb2.ProduceResponse:  # noqa: N802
        return broker_pb2.ProduceResponse()


async def serve_null(port: int) -> None:
    server = grpc.aio.server(options=OPTIONS)
    broker_pb2_grpc.add_BrokerServicer_to_server(NullBroker(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


def request_for(acks: int, records_per_batch: int) -> broker_pb2.ProduceRequest:
    value = b"v" * 100
    data = build_batch([NewRecord(None, value)] * records_per_batch, base_timestamp=0)
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=30_000)
    request.topics.add(name=TOPIC).partitions.add(partition_index=0, records=data)
    return request


async def run_load(
    address: str, request: broker_pb2.ProduceRequest, seconds: float, in_flight: int
) -> tuple[int, list[float]]:
    latencies: list[float] = []
    requests = 0
    deadline = time.perf_counter() + seconds
    async with grpc.aio.insecure_channel(address, options=OPTIONS) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)

        async def worker() -> None:
            nonlocal requests
            while time.perf_counter() < deadline:
                started = time.perf_counter()
                response = await stub.Produce(request, timeout=60)
                for t in response.responses:
                    for p in t.partitions:
                        if p.error_code != 0:
                            raise RuntimeError(f"produce failed with error {p.error_code}")
                latencies.append((time.perf_counter() - started) * 1000)
                requests += 1

        await asyncio.gather(*(worker() for _ in range(in_flight)))
    return requests, latencies


def report(label: str, records_per_batch: int, requests: int, lat: list[float], s: float) -> None:
    records = requests * records_per_batch
    mb = records * 100 / 1e6
    p50 = statistics.median(lat)
    p99 = statistics.quantiles(lat, n=100)[98] if len(lat) >= 100 else max(lat)
    print(
        f"{label:<10} {records_per_batch:>6} {records / s:>12,.0f} {mb / s:>8.1f} "
        f"{p50:>9.2f} {p99:>9.2f}",
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--serve-null", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_null:
        asyncio.run(serve_null(args.serve_null))
        return
    null_port = localcluster._free_ports(1)[0]
    null = subprocess.Popen([sys.executable, __file__, "--serve-null", str(null_port)])
    with tempfile.TemporaryDirectory() as tmp:
        state = localcluster.up(Path(tmp) / "cluster", controllers=1)
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        try:
            zk.start()
            FakeController(zk).create_topic(TOPIC, {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
            leader = state.process("broker-1").address
            print(
                f"3 brokers, RF 3, min.insync.replicas 2, {args.in_flight} requests in flight, "
                f"{args.seconds:.0f} s per row, 100-byte records"
            )
            print(
                f"{'target':<10} {'batch':>6} {'records/s':>12} {'MB/s':>8} {'p50 ms':>9} "
                f"{'p99 ms':>9}"
            )
            for records_per_batch in (1, 100, 1000):
                for label, acks, address in (
                    ("raw gRPC", 1, f"127.0.0.1:{null_port}"),
                    ("acks=1", 1, leader),
                    ("acks=all", -1, leader),
                ):
                    request = request_for(acks, records_per_batch)
                    requests, lat = asyncio.run(
                        run_load(address, request, args.seconds, args.in_flight)
                    )
                    report(label, records_per_batch, requests, lat, args.seconds)
        finally:
            zk.stop()
            localcluster.down(state)
            null.terminate()
            null.wait(10)


if __name__ == "__main__":
    main()
