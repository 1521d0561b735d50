"""Helpers for the tests of the brokers' KAFKA listeners: where they are, a topic on them, and
every acknowledged record read back at its offset."""

from __future__ import annotations

import json
import socket
import struct
from collections.abc import Iterable, Mapping

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import TopicPartitionStateZNode
from tests.integration.conftest import Cluster


def kafka_bootstrap(c: Cluster) -> str:
    """Every broker's KAFKA listener, as the cluster's state file records them (what
    `cluster status --json` lists, without a process to start)."""
    ports = [p.kafka_port for p in c.reload().processes if p.kafka_port]
    assert ports, "no broker has a KAFKA listener"
    return ",".join(f"127.0.0.1:{port}" for port in ports)


def kafka_address(c: Cluster, broker_id: int) -> tuple[str, int]:
    """One broker's KAFKA listener."""
    (port,) = [p.kafka_port for p in c.reload().processes if p.name == f"broker-{broker_id}"]
    return "127.0.0.1", int(port)


def create_topic(c: Cluster, topic: str, partitions: int = 3) -> None:
    c.cli("topics", "create", topic, "--partitions", str(partitions),
          "--replication-factor", "3", "--config", "min.insync.replicas=2", "--wait")  # fmt: skip


def assert_all_acked_read_back(
    acked: Mapping[tuple[int, int], bytes], read: Iterable[tuple[int, int, bytes]]
) -> None:
    """Every acknowledged (partition, offset) -> value is among what was read, at that offset."""
    got = {(p, o): v for p, o, v in read}
    missing = {k: v for k, v in acked.items() if got.get(k) != v}
    assert not missing, f"{len(missing)} acknowledged records not read back: {list(missing)[:5]}"


def registered_endpoints(c: Cluster, broker_id: int) -> list[str]:
    data, _ = c.zk.get(f"/brokers/ids/{broker_id}")
    assert data is not None
    endpoints: list[str] = json.loads(data)["endpoints"]
    return endpoints


def leader_of(c: Cluster, topic: str, partition: int) -> int:
    """The partition's leader as its state znode says."""
    data, stat = c.zk.get(TopicPartitionStateZNode.path(TopicPartition(topic, partition)))
    return TopicPartitionStateZNode.decode(data, stat.version).leader


# ---- raw Kafka frames, for hostile and protocol-level tests ---------------------------


def request_bytes(request: object, version: int, correlation_id: int = 1) -> bytes:
    request.API_VERSION = version  # type: ignore[attr-defined]
    request.with_header(correlation_id=correlation_id, client_id="hostile")  # type: ignore[attr-defined]
    return bytes(request.encode(header=True, framed=True))  # type: ignore[attr-defined]


def closed_by_broker(s: socket.socket) -> bool:
    """Whether the broker closes the connection (reads end) within the deadline."""
    try:
        while s.recv(65536):
            pass
        return True
    except ConnectionResetError:
        return True
    finally:
        s.close()


def read_frame(s: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = b""
        while len(out) < n:
            chunk = s.recv(n - len(out))
            assert chunk, "the broker closed the connection instead of answering"
            out += chunk
        return out

    (size,) = struct.unpack(">i", exactly(4))
    return struct.pack(">i", size) + exactly(size)
