"""The pre-built produce cases' traffic: one channel and one serialized Produce request per
partition leader, sent in a closed loop (`in_flight` per leader) or an open loop at a fixed
rate with latency from each request's scheduled time (no coordinated omission)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from bench.load_cluster import Cluster
from minibroker.rpc import broker_pb2

OPTIONS = [
    ("grpc.max_send_message_length", 64 << 20),
    ("grpc.max_receive_message_length", 64 << 20),
]


def produce_request(
    acks: int, topic: str, partition: int, batch: bytes
) -> broker_pb2.ProduceRequest:
    request = broker_pb2.ProduceRequest(acks=acks, timeout_ms=30_000)
    request.topics.add(name=topic).partitions.add(partition_index=partition, records=batch)
    return request


def check_response(response: Any) -> None:
    for topic in response.responses:
        for p in topic.partitions:
            if p.error_code != 0:
                raise RuntimeError(f"produce failed with error {p.error_code}: {p.error_message}")


@dataclass
class Targets:
    """One channel and one pre-serialized request per partition leader."""

    calls: list[tuple[Callable[..., Any], bytes]]

    @classmethod
    def open(
        cls, channels: dict[str, grpc.aio.Channel], cluster: Cluster, acks: int, batch: bytes
    ) -> Targets:
        calls = []
        for partition, address in sorted(cluster.leaders.items()):
            if address not in channels:
                channels[address] = grpc.aio.insecure_channel(address, options=OPTIONS)
            # Raw bytes both ways: the request is serialized once, as a real client's batch is
            # built once; only the (small) response is parsed.
            call = channels[address].unary_unary(
                "/minibroker.v1.Broker/Produce",
                request_serializer=None,
                response_deserializer=broker_pb2.ProduceResponse.FromString,
            )
            request = produce_request(acks, cluster.topic, partition, batch)
            calls.append((call, request.SerializeToString()))
        return cls(calls)


async def closed_loop(
    targets: Targets, seconds: float, in_flight: int
) -> tuple[int, list[float], float]:
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds

    async def worker(call: Callable[..., Any], request: bytes) -> None:
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            check_response(await call(request, timeout=60))
            latencies.append((time.perf_counter() - sent) * 1000)

    await asyncio.gather(*(worker(c, r) for c, r in targets.calls for _ in range(in_flight)))
    return len(latencies), latencies, time.perf_counter() - started


async def open_loop(
    targets: Targets, seconds: float, rate_per_s: float
) -> tuple[int, list[float], float]:
    """Requests at a fixed total rate, spread over the leaders in turn; latency from each
    request's scheduled time (no coordinated omission)."""
    latencies: list[float] = []
    pending: set[asyncio.Task[None]] = set()
    interval = 1.0 / rate_per_s
    started = time.perf_counter()
    count = int(seconds * rate_per_s)

    async def one(call: Callable[..., Any], request: bytes, scheduled: float) -> None:
        check_response(await call(request, timeout=60))
        latencies.append((time.perf_counter() - scheduled) * 1000)

    for i in range(count):
        scheduled = started + i * interval
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        call, request = targets.calls[i % len(targets.calls)]
        task = asyncio.create_task(one(call, request, scheduled))
        pending.add(task)
        task.add_done_callback(pending.discard)
    if pending:
        await asyncio.gather(*pending)
    return len(latencies), latencies, time.perf_counter() - started
