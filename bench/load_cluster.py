"""The load benchmark's cluster: a process-mode cluster with its topic and every partition
led, and the brokers' own request counters read from their Prometheus metrics."""

from __future__ import annotations

import asyncio
import os
import random
import tempfile
import time
import urllib.request
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from minibroker import localcluster
from minibroker.client import admin_zk
from minibroker.localcluster.secure import configure_tools, forget_tools
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime.waiting import wait_until

TOPIC = "bench"
REQUESTS_METRIC = "kafka_network_requestmetrics_requestspersec_total{"


@dataclass(frozen=True)
class Cluster:
    """A running benchmark cluster: its state and each partition's leader address."""

    state: localcluster.ClusterState
    leaders: dict[int, str]
    topic: str = TOPIC
    replicas: int = 3

    @property
    def bootstrap(self) -> str:
        return next(iter(self.leaders.values()))


def _metadata(address: str, topic: str) -> Any:
    with grpc_security.sync_channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        return stub.Metadata(broker_pb2.MetadataRequest(topics=[topic]), timeout=5)


def ready_leaders(
    address: str, topic: str, partitions: int, replicas: int
) -> dict[int, str] | None:
    """Each partition's leader address once every partition has a leader and a full ISR."""
    try:
        response = _metadata(address, topic)
    except grpc.RpcError:
        return None
    hosts = {b.node_id: f"{b.host}:{b.port}" for b in response.brokers}
    leaders: dict[int, str] = {}
    for t in response.topics:
        for p in t.partitions:
            if p.error_code == 0 and p.leader_id in hosts and len(p.isr_nodes) == replicas:
                leaders[p.partition_index] = hosts[p.leader_id]
    return leaders if len(leaders) == partitions else None


@contextmanager
def running_cluster(
    partitions: int = 3,
    replicas: int = 3,
    profile: str = "kafka",
    overrides: Sequence[str] = (),
    secure: bool = False,
) -> Iterator[Cluster]:
    """A fresh process-mode cluster (3 brokers, 1 controller) with the topic ready. Kafka's
    timings by default: with the demo profile's 3 s replica lag, a follower starved of CPU by
    the load itself can drop out of the ISR and fail acks=all writes (error 20)."""
    with tempfile.TemporaryDirectory(prefix="bench-minibroker-") as tmp:
        state = localcluster.up(
            Path(tmp) / "cluster", controllers=1, profile=profile, overrides=overrides,
            secure=secure,
        )  # fmt: skip
        if secure:  # this process dials it with the admin's ZooKeeper login and certificate
            configure_tools(Path(state.dir))
        try:
            yield add_topic(state, TOPIC, partitions, replicas)
        finally:
            localcluster.down(state)
            if secure:
                forget_tools()


def add_topic(
    state: localcluster.ClusterState, topic: str, partitions: int, replicas: int
) -> Cluster:
    """Create `topic` (min.insync.replicas 2 where RF allows) and wait for its leaders."""
    with localcluster.zk_session(state.zk_connect) as zk:
        config = {"min.insync.replicas": str(min(2, replicas))}
        admin_zk.create_topic(zk, topic, partitions, replicas, config, random.Random(1))
    address = state.by_role("broker")[0].address
    found: dict[int, str] = {}

    def ready() -> bool:
        found.update(ready_leaders(address, topic, partitions, replicas) or {})
        return len(found) == partitions

    wait_until(ready, timeout_s=30, what=f"topic {topic}'s leaders and ISRs")
    return Cluster(state, found, topic, replicas)


def request_counts(state: localcluster.ClusterState) -> dict[str, float]:
    """Requests handled so far by all brokers, by kind, from their Prometheus endpoints."""
    counts: dict[str, float] = {}
    for b in state.by_role("broker"):
        if not b.metrics_port:
            continue
        url = f"http://{b.host}:{b.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            text = response.read().decode()
        for line in text.splitlines():
            if line.startswith(REQUESTS_METRIC):
                kind = line.split('request="', 1)[1].split('"', 1)[0]
                counts[kind] = counts.get(kind, 0.0) + float(line.rsplit(" ", 1)[1])
    return counts


async def followers_behind(channels: Sequence[grpc.aio.Channel], topic: str) -> int:
    """Records the followers still lack, summed over the topic's partitions led through
    `channels`: each leader's log end offset minus each follower's latest fetch offset."""
    behind = 0
    for channel in channels:
        stub = broker_pb2_grpc.BrokerStub(channel)
        response = await stub.DescribeBroker(broker_pb2.DescribeBrokerRequest(), timeout=10)
        for p in response.partitions:
            if p.is_leader and p.topic == topic:
                behind += sum(p.log_end_offset - r.log_end_offset for r in p.remote_replicas)
    return behind


async def wait_replicated(
    channels: Sequence[grpc.aio.Channel], topic: str, timeout_s: float = 120.0
) -> float:
    """Seconds until every follower holds every record its leader has (polled every 20 ms)."""
    started = time.perf_counter()
    while await followers_behind(channels, topic) > 0:
        if time.perf_counter() - started > timeout_s:
            raise TimeoutError(f"the followers of {topic} did not catch up in {timeout_s:g} s")
        await asyncio.sleep(0.02)
    return time.perf_counter() - started


def release_page_cache(cluster: Cluster) -> int:
    """Write back every file of the cluster and drop it from the page cache (bytes released):
    a half-load case then writes into pages the earlier cases freed, not into guest memory
    the VM touches for the first time. On these machines a peak's ~1.3 GB left in the page
    cache made the next case's writes cost 2.5x the system CPU and its p99 4x; `sync` alone
    did not help, releasing those pages did (bench/profiles/kafka-half-load.md §5). The
    brokers and their files are untouched; only the kernel's copy in memory goes."""
    released = 0
    for path in Path(cluster.state.dir).rglob("*"):
        if not path.is_file() or path.is_symlink():
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue  # gone meanwhile (a rolled index, a ZooKeeper snapshot)
        try:
            os.fsync(fd)  # dirty pages cannot be dropped
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            released += os.fstat(fd).st_size
        except OSError:
            pass
        finally:
            os.close(fd)
    return released
