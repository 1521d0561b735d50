"""`python -m bench reassign [--size-mb 64] [--rate-mb 8] [--load 200]`: a partition's move
between brokers (KIP-455), unthrottled and throttled (KIP-73), timed on a process-mode cluster,
and what it costs acks=all producers on the same brokers.

One cluster (ZooKeeper, 3 brokers, 1 controller, Kafka's timings): topic `moved` (1 partition,
replicas [1,2]) filled with `size-mb` MB, and topic `bench` (3 partitions, RF 3) written by an
open-loop acks=all producer at `load` requests/s of one 1 KiB record (latency from each
request's scheduled time). Three phases of the same length: no move; an unthrottled move of
`moved` ([1,2] -> [3,2]: broker 3 copies the whole log); a move back under a throttle of
`rate-mb` MB/s set as `kafka-reassign-partitions --throttle` sets it ([3,2] -> [1,3]: broker 1,
whose replica the first move deleted, copies it all again). A move's time runs from the
AlterPartitionReassignments call until the topic znode has no adding/removing replicas left;
the throttled one is set beside size / rate. Three seconds of load before the phases warm the
cluster up and are not counted. Takes about a minute with the defaults.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass

import grpc

from bench.common import Section, md_table, percentiles
from bench.load_cluster import Cluster, ready_leaders, running_cluster
from bench.produce_loops import Targets, open_loop
from minibroker.client import controller_admin, reassignment_throttles
from minibroker.client.admin_zk import create_topic
from minibroker.client.producer import Producer
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import TopicZNode
from minibroker.localcluster import ClusterState, zk_session
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore

MOVED = TopicPartition("moved", 0)
RECORD = 64 * 1024  # the moved partition is filled with 64 KiB records


@dataclass(frozen=True)
class Phase:
    name: str
    move_s: float | None  # None: no move in this phase
    p50_ms: float | None
    p99_ms: float | None
    requests: int


def _fill(cluster: Cluster, size_mb: int) -> int:
    """`size_mb` MB of acknowledged records in `moved`; the bytes written."""

    async def run() -> int:
        value = b"m" * RECORD
        count = size_mb * 1_000_000 // RECORD
        async with Producer(cluster.bootstrap, acks=-1, batch_size=1 << 20, linger_ms=5) as p:
            futures = [await p.send(MOVED.topic, value, partition=0) for _ in range(count)]
            await asyncio.gather(*futures)
        return count * RECORD

    return asyncio.run(run())


def _moving(zk: ZkStore) -> bool:
    got = zk.get_or_none(TopicZNode.path(MOVED.topic))
    assert got is not None
    a = TopicZNode.decode(MOVED.topic, got[0])
    return bool(a.adding_replicas or a.removing_replicas)


def _move(zk: ZkStore, target: list[int]) -> float:
    """Seconds from the request until the move is complete in ZooKeeper."""
    started = time.perf_counter()
    top, message, results = asyncio.run(
        controller_admin.alter_partition_reassignments(zk, {MOVED: target})
    )
    if top.value != 0 or results[MOVED].error.value != 0:
        raise RuntimeError(f"the move was refused: {top.name} {message} {results}")
    wait_until(lambda: not _moving(zk), timeout_s=600, what="the move", interval_s=0.02)
    return time.perf_counter() - started


async def _load(cluster: Cluster, load: float, seconds: float) -> tuple[int, list[float]]:
    channels: dict[str, grpc.aio.Channel] = {}
    try:
        batch = build_batch([NewRecord(None, b"t" * 1024)], base_timestamp=int(time.time() * 1000))
        targets = Targets.open(channels, cluster, -1, batch)
        count, latencies, _ = await open_loop(targets, seconds, load)
        return count, latencies
    finally:
        for channel in channels.values():
            await channel.close()


def _phase(
    name: str, cluster: Cluster, zk: ZkStore, load: float, seconds: float,
    target: list[int] | None,
) -> Phase:  # fmt: skip
    """`seconds` of load, with a move to `target` started at its beginning (if any)."""

    async def both() -> tuple[tuple[int, list[float]], float | None]:
        loop = asyncio.get_running_loop()
        moved = loop.run_in_executor(None, _move, zk, target) if target is not None else None
        traffic = await _load(cluster, load, seconds)
        return traffic, (await moved if moved is not None else None)

    (count, latencies), move_s = asyncio.run(both())
    p50, p99, _ = percentiles(latencies)
    return Phase(name, move_s, p50, p99, count)


def measure(size_mb: int, rate_mb: float, load: float, seconds: float) -> Section:
    rate = int(rate_mb * 1_000_000)
    with running_cluster(partitions=3, replicas=3, profile="kafka") as traffic_cluster:
        state = traffic_cluster.state
        with zk_session(state.zk_connect) as zk:
            create_topic(zk, MOVED.topic, 1, 2, {}, random.Random(1),
                         replica_assignment={0: [1, 2]})  # fmt: skip
        moved = add_topic_ready(state)
        written = _fill(moved, size_mb)
        # Warm-up, not measured: the first seconds of load after the fill once read p99 724 ms.
        asyncio.run(_load(traffic_cluster, load, 3.0))
        with zk_session(state.zk_connect) as zk:
            phases = [_phase("no move", traffic_cluster, zk, load, seconds, None)]
            phases.append(_phase("unthrottled move", traffic_cluster, zk, load, seconds, [3, 2]))
            # As `kafka-reassign-partitions --throttle`, lifted as `--verify` lifts it.
            reassignment_throttles.set_throttles(zk, {MOVED: (3, 2)}, {MOVED: (1, 3)}, rate)
            try:
                phases.append(
                    _phase(
                        f"move throttled at {rate_mb:g} MB/s",
                        traffic_cluster,
                        zk,
                        load,
                        max(seconds, 1.5 * written / rate),
                        [1, 3],
                    )  # fmt: skip
                )
            finally:
                reassignment_throttles.clear_throttles(zk, [MOVED.topic], [1, 2, 3])
    expected_s = written / rate
    throttled = phases[2].move_s or 0.0
    rows = [
        (
            p.name,
            "-" if p.move_s is None else f"{p.move_s:.1f}",
            p.requests,
            "-" if p.p50_ms is None else f"{p.p50_ms:.1f}",
            "-" if p.p99_ms is None else f"{p.p99_ms:.1f}",
        )
        for p in phases
    ]
    markdown = (
        f"Partition `moved` holds {written / 1e6:.1f} MB; topic `bench` takes {load:g} acks=all "
        f"requests/s (1 KiB each) on the same three brokers throughout.\n\n"
        + md_table(["phase", "move s", "requests", "p50 ms", "p99 ms"], rows)
        + f"\n\nThrottled at {rate_mb:g} MB/s the move took {throttled:.1f} s against size / rate"
        f" = {expected_s:.1f} s ({100 * (throttled - expected_s) / expected_s:+.0f}%)."
    )
    figures = {
        "reassign.size_mb": written / 1e6,
        "reassign.rate_mb": rate_mb,
        "reassign.throttled_s": throttled,
        "reassign.expected_s": expected_s,
        "reassign.unthrottled_s": phases[1].move_s or 0.0,
        "reassign.p99_no_move_ms": phases[0].p99_ms or 0.0,
        "reassign.p99_unthrottled_ms": phases[1].p99_ms or 0.0,
        "reassign.p99_throttled_ms": phases[2].p99_ms or 0.0,
    }
    return Section("Reassignment and replication throttling", markdown, figures)


def add_topic_ready(state: ClusterState) -> Cluster:
    """The `moved` topic as a load-benchmark Cluster (its leader known, both replicas in sync)."""
    address = state.by_role("broker")[0].address
    found: dict[int, str] = {}

    def ready() -> bool:
        found.update(ready_leaders(address, MOVED.topic, 1, 2) or {})
        return bool(found)

    wait_until(ready, timeout_s=30, what="moved's leader")
    return Cluster(state, found, MOVED.topic, 2)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--size-mb", type=int, default=64, help="the moved partition's size")
    parser.add_argument("--rate-mb", type=float, default=8.0, help="throttle, MB/s (default 8)")
    parser.add_argument("--load", type=float, default=200.0, help="acks=all requests/s")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of a phase")


def main(args: argparse.Namespace) -> None:
    section = measure(args.size_mb, args.rate_mb, args.load, args.seconds)
    print(f"## {section.title}\n\n{section.markdown}\n")
    for name, value in sorted(section.figures.items()):
        print(f"{name} = {value:g}")
