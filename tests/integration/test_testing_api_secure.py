"""The test bed's client configs on a secure cluster (issue 39 §1): `Cluster(secure=True)`
hands confluent-kafka, kafka-python and aiokafka what they need for its SASL_SSL listeners
(SCRAM-SHA-512, the cluster's CA), and each of them writes and reads with it."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from minibroker.testing import Cluster

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(secure=True, controllers=1) as c:
        c.create_topic("secured", partitions=1, replication_factor=3, min_insync_replicas=2)
        yield c


def test_the_configs_name_the_secure_listeners(cluster: Cluster) -> None:
    confluent = cluster.confluent_config()
    assert confluent["security.protocol"] == "SASL_SSL"
    assert confluent["sasl.mechanism"] == "SCRAM-SHA-512"
    assert confluent["ssl.ca.location"].endswith(".pem")
    assert cluster.kafka_python_config()["security_protocol"] == "SASL_SSL"
    assert cluster.aiokafka_config()["ssl_context"] is not None


def test_confluent_kafka_writes_and_reads(cluster: Cluster) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer(cluster.confluent_config(acks="all", message_timeout_ms=30_000))
    errors: list[Any] = []
    p.produce("secured", b"from confluent", on_delivery=lambda e, _m: errors.append(e))
    assert p.flush(60) == 0 and errors == [None]
    c = Consumer(cluster.confluent_config(group_id="c", enable_auto_commit=False))
    try:
        c.assign([TopicPartition("secured", 0, 0)])
        msg = c.poll(30)
        assert msg is not None and msg.error() is None and msg.value() == b"from confluent"
    finally:
        c.close()


def test_kafka_python_writes_and_reads(cluster: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(**cluster.kafka_python_config(acks="all"))
    try:
        metadata = producer.send("secured", b"from kafka-python").get(timeout=60)
    finally:
        producer.close()
    consumer = KafkaConsumer(**cluster.kafka_python_config(consumer_timeout_ms=30_000))
    try:
        tp = TopicPartition("secured", 0)
        consumer.assign([tp])
        consumer.seek(tp, metadata.offset)
        assert next(consumer).value == b"from kafka-python"
    finally:
        consumer.close()


def test_aiokafka_writes_and_reads(cluster: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    async def run() -> bytes | None:
        producer = AIOKafkaProducer(**cluster.aiokafka_config(acks="all"))
        await producer.start()
        try:
            sent = await producer.send_and_wait("secured", b"from aiokafka")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(**cluster.aiokafka_config())
        await consumer.start()
        try:
            tp = TopicPartition("secured", 0)
            consumer.assign([tp])
            consumer.seek(tp, sent.offset)
            msg = await asyncio.wait_for(consumer.getone(), timeout=30)
            value: bytes | None = msg.value
            return value
        finally:
            await consumer.stop()

    assert asyncio.run(run()) == b"from aiokafka"


def test_kafka_acls_through_the_secure_listener(cluster: Cluster) -> None:
    """kafka-acls --bootstrap-server with --command-config (issue 39 §4): the admin's SCRAM
    login from the cluster's admin.properties, CreateAcls/DescribeAcls/DeleteAcls over SASL_SSL."""
    import subprocess
    import sys
    from pathlib import Path

    script = Path(__file__).resolve().parents[2] / "bin" / "kafka-acls.sh"
    login = ["--bootstrap-server", cluster.bootstrap_servers, "--command-config",
             str(cluster.state.admin_client_config)]  # fmt: skip
    acl = ["--allow-principal", "User:carol", "--operation", "Read", "--topic", "secured"]

    def run(*args: str) -> str:
        got = subprocess.run([str(script), *login, *args], capture_output=True, text=True,
                             timeout=120, env={"MINIBROKER_PYTHON": sys.executable})  # fmt: skip
        assert got.returncode == 0, got.stdout + got.stderr
        return got.stdout

    assert "(principal=User:carol, host=*, operation=READ, permissionType=ALLOW)" in run(
        "--add", *acl
    )
    assert "User:carol" in run("--list", "--topic", "secured")
    run("--remove", "--force", *acl)
    assert "User:carol" not in run("--list", "--topic", "secured")
