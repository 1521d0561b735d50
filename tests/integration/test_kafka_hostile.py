"""Hostile input on a broker's KAFKA listener (issue 19): bad framing lengths (negative, over
socket.request.max.bytes, 100 MB announced and never sent, longer than the bytes sent),
truncated requests, unknown API keys and versions, bodies that do not parse, a slow sender and
a silent one. Each gets an answer or a closed connection, within a deadline. Refused
produces and fetches come back with Kafka's codes (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER, OFFSET_OUT_OF_RANGE). Afterwards the broker
still answers, no handler failed, and no byte reached the log."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from minibroker.core import records
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord
from tests.integration.conftest import Cluster, cluster_with_zk, segment_bytes
from tests.integration.kafka_wire import (
    closed_by_broker,
    create_topic,
    kafka_address,
    kafka_bootstrap,
    leader_of,
    read_frame,
    request_bytes,
)

pytestmark = pytest.mark.integration

IDLE_MS = 1500
DEADLINE_S = 10.0


@pytest.fixture(scope="module")
def hc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("kafka-hostile") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1", "--set", f"connections.max.idle.ms={IDLE_MS}"
    ) as c:
        create_topic(c, "t", partitions=1)
        yield c


def address(c: Cluster) -> tuple[str, int]:
    host, port = kafka_bootstrap(c).split(",")[0].split(":")
    return host, int(port)


def connect(c: Cluster) -> socket.socket:
    s = socket.create_connection(address(c), timeout=DEADLINE_S)
    s.settimeout(DEADLINE_S)
    return s


@pytest.mark.parametrize(
    ("name", "payload"),
    [
        ("negative size", struct.pack(">i", -7) + b"xxxx"),
        ("over socket.request.max.bytes", struct.pack(">i", 200 << 20) + b"x" * 100),
        ("shorter than a header", struct.pack(">i", 3) + b"\x00\x03\x00"),
        ("unknown API key", struct.pack(">ihhi", 8, 999, 0, 1)),
        ("Produce v0 (message format 0)", struct.pack(">ihhi", 8, 0, 0, 1)),
        ("LeaderAndIsr from a client", struct.pack(">ihhi", 8, 4, 0, 1)),
        ("a body that does not parse", struct.pack(">ihhi", 20, 3, 9, 1) + b"\xff" * 12),
    ],
)
def test_what_cannot_be_served_closes_the_connection(
    hc: Cluster, name: str, payload: bytes
) -> None:
    s = connect(hc)
    s.sendall(payload)
    assert closed_by_broker(s), name


def test_an_unknown_apiversions_version_is_answered_unsupported_version(hc: Cluster) -> None:
    s = connect(hc)
    s.sendall(struct.pack(">ihhi", 8, 18, 99, 42))
    response = ApiVersionsResponse.decode(read_frame(s), version=0, header=True, framed=True)
    s.close()
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert response.header.correlation_id == 42


def test_a_frame_announced_and_never_sent_holds_nothing_and_ends_with_the_idle_timeout(
    hc: Cluster,
) -> None:
    s = connect(hc)
    s.sendall(struct.pack(">i", 100_000_000) + b"x" * 1000)  # 100 MB announced, 1 KB sent
    started = time.monotonic()
    assert closed_by_broker(s)
    assert time.monotonic() - started < IDLE_MS / 1000 + DEADLINE_S


def test_a_slow_sender_is_answered_and_a_silent_one_closed(hc: Cluster) -> None:
    s = connect(hc)
    for b in request_bytes(ApiVersionsRequest(), 0, correlation_id=3):
        s.sendall(bytes([b]))
        time.sleep(0.01)  # a byte every 10 ms: slower than any client, faster than the idle limit
    assert ApiVersionsResponse.decode(read_frame(s), version=0, header=True, framed=True)
    started = time.monotonic()
    assert closed_by_broker(s)  # then silence: connections.max.idle.ms
    assert IDLE_MS / 1000 * 0.5 < time.monotonic() - started < IDLE_MS / 1000 + DEADLINE_S


def test_pipelined_requests_are_answered_in_order(hc: Cluster) -> None:
    s = connect(hc)
    s.sendall(
        b"".join(
            request_bytes(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9, i)
            for i in range(20)
        )
    )
    ids = [
        MetadataResponse.decode(
            read_frame(s), version=9, header=True, framed=True
        ).header.correlation_id
        for _ in range(20)
    ]
    s.close()
    assert ids == list(range(20))


def produce_answer(c: Cluster, broker_id: int, topic: str, records: bytes) -> Any:
    """The partition answer to a Produce v8 (acks=all) of `records` to partition 0."""
    topic_data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[topic_data(name=topic, partition_data=[
            topic_data.PartitionProduceData(index=0, records=records)])],
    )  # fmt: skip
    with socket.create_connection(kafka_address(c, broker_id), timeout=DEADLINE_S) as s:
        s.sendall(request_bytes(request, 8))
        response = ProduceResponse.decode(read_frame(s), version=8, header=True, framed=True)
    return response.responses[0].partition_responses[0]


def a_batch(value: bytes = b"v") -> bytes:
    return records.build_batch([NewRecord(None, value)], base_timestamp=int(time.time() * 1000))


def test_kafkas_error_codes_come_back_on_the_kafka_listener(hc: Cluster) -> None:
    """Kafka's codes for what the brokers refuse, in the Produce and Fetch answers (nothing of
    it is written: the last test checks the logs are still empty)."""
    leader = leader_of(hc, "t", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    corrupt = bytearray(a_batch(b"x" * 40))
    corrupt[-5] ^= 0xFF  # a byte of the record, inside the CRC's range
    cases = [
        (leader, "t", bytes(corrupt), ErrorCode.CORRUPT_MESSAGE),
        (leader, "t", a_batch(b"x" * (1100 << 10)), ErrorCode.MESSAGE_TOO_LARGE),
        (leader, "no-such-topic", a_batch(), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (follower, "t", a_batch(), ErrorCode.NOT_LEADER_OR_FOLLOWER),
    ]
    for broker_id, topic, batch, expected in cases:
        answer = produce_answer(hc, broker_id, topic, batch)
        assert answer.error_code == expected, (expected.name, answer)

    fetch_topic = FetchRequest.FetchTopic
    fetch = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
        session_id=0, session_epoch=-1, forgotten_topics_data=[], rack_id="",
        topics=[fetch_topic(topic="t", partitions=[fetch_topic.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=10**6, log_start_offset=-1,
            partition_max_bytes=1 << 20)])],
    )  # fmt: skip
    with socket.create_connection(kafka_address(hc, leader), timeout=DEADLINE_S) as s:
        s.sendall(request_bytes(fetch, 11))
        response = FetchResponse.decode(read_frame(s), version=11, header=True, framed=True)
    (partition,) = response.responses[0].partitions
    assert partition.error_code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_afterwards_the_broker_serves_and_nothing_reached_the_log(hc: Cluster) -> None:
    before = segment_bytes(hc)
    s = connect(hc)
    s.sendall(request_bytes(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9))
    response = MetadataResponse.decode(read_frame(s), version=9, header=True, framed=True)
    s.close()
    assert {b.node_id for b in response.brokers} == {1, 2, 3}
    assert segment_bytes(hc) == before == {1: b"", 2: b"", 3: b""}
    for p in hc.reload().by_role("broker"):
        assert not [e for e in hc.log_events(p.name) if e.get("event") == "request_failed"]
