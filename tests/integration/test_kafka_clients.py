"""Unmodified Kafka clients against the brokers' KAFKA listeners (issue 19): confluent-kafka
(librdkafka), kafka-python and aiokafka produce with acks=all and read every acknowledged
record back at its offset, with the Kafka protocol's own Metadata, Produce, Fetch, ListOffsets
and InitProducerId (kafka-python's default producer is idempotent)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import closing

import pytest

from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import (
    assert_all_acked_read_back,
    create_topic,
    kafka_bootstrap,
    registered_endpoints,
)

pytestmark = pytest.mark.integration

RECORDS = 300


@pytest.fixture(scope="module")
def kc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("kafka-clients") / "cluster"
    with cluster_with_zk(d, "--controllers", "1") as c:
        yield c


def test_brokers_register_their_kafka_listener_beside_grpc(kc: Cluster) -> None:
    endpoints = registered_endpoints(kc, 1)
    assert [e.split("://")[0] for e in endpoints] == ["PLAINTEXT", "KAFKA"]


def test_confluent_kafka_round_trip(kc: Cluster) -> None:
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    create_topic(kc, "ck")
    bootstrap = kafka_bootstrap(kc)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[KafkaError] = []

    def delivered(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

    for i in range(RECORDS):
        producer.produce("ck", value=b"ck-%d" % i, key=b"k%d" % (i % 7), callback=delivered)
    assert producer.flush(30) == 0 and not errors
    assert len(acked) == RECORDS and {p for p, _ in acked} == {0, 1, 2}

    conf = {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False}
    read: list[tuple[int, int, bytes]] = []
    with closing(Consumer(conf)) as consumer:
        consumer.assign([TopicPartition("ck", p, 0) for p in range(3)])
        deadline = time.monotonic() + 30
        while len(read) < RECORDS and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                read.append((msg.partition() or 0, msg.offset() or 0, msg.value() or b""))
    assert_all_acked_read_back(acked, read)


def test_kafka_python_round_trip_with_its_idempotent_default_producer(kc: Cluster) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    create_topic(kc, "kp")
    bootstrap = kafka_bootstrap(kc).split(",")
    acked = {}
    with closing(KafkaProducer(bootstrap_servers=bootstrap, acks="all")) as producer:
        sent = [producer.send("kp", value=b"kp-%d" % i, key=b"k%d" % i) for i in range(RECORDS)]
        producer.flush(30)
        for i, f in enumerate(sent):
            md = f.get(timeout=30)
            acked[(md.partition, md.offset)] = b"kp-%d" % i
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000
    )
    with closing(consumer):
        consumer.assign([TopicPartition("kp", p) for p in range(3)])
        consumer.seek_to_beginning()
        read = [(m.partition, m.offset, m.value) for m in consumer]
    assert_all_acked_read_back(acked, read)


def test_aiokafka_round_trip(kc: Cluster) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    create_topic(kc, "ak")
    bootstrap = kafka_bootstrap(kc)

    async def run() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all")
        await producer.start()
        try:
            acked = {}
            for i in range(RECORDS):
                md = await producer.send_and_wait("ak", b"ak-%d" % i, key=b"k%d" % i)
                acked[(md.partition, md.offset)] = b"ak-%d" % i
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
        await consumer.start()
        try:
            tps = [TopicPartition("ak", p) for p in range(3)]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            read: list[tuple[int, int, bytes]] = []
            async with asyncio.timeout(30):
                while len(read) < RECORDS:
                    batch = await consumer.getmany(timeout_ms=500)
                    read += [(m.partition, m.offset, m.value) for ms in batch.values() for m in ms]
        finally:
            await consumer.stop()
        assert_all_acked_read_back(acked, read)

    asyncio.run(run())


def test_a_client_that_does_not_allow_auto_creation_sees_an_unknown_topic(kc: Cluster) -> None:
    # allow.auto.create.topics=false (Metadata v4+'s allow_auto_topic_creation): the broker
    # answers UNKNOWN_TOPIC_OR_PARTITION and creates nothing (auto-creation itself:
    # test_topic_operations).
    from kafka import KafkaConsumer

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(kc).split(","), allow_auto_create_topics=False
    )
    with closing(consumer):
        assert not consumer.partitions_for_topic("no-such-topic")  # None or an empty set
    assert kc.zk.exists("/brokers/topics/no-such-topic") is None


def test_brokers_taking_producer_id_blocks_at_once_never_share_an_id(kc: Cluster) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from broker.kafka.producer_ids import ProducerIdManager

    managers = [ProducerIdManager(kc.zk, broker_id) for broker_id in (7, 8, 9)]
    with ThreadPoolExecutor(3) as pool:
        blocks = list(pool.map(lambda m: [m.take_block() for _ in range(5)], managers))
    taken = sorted((b.block_start, b.block_end) for bs in blocks for b in bs)
    assert len(taken) == 15
    assert all(a[1] < b[0] for a, b in zip(taken, taken[1:], strict=False))  # disjoint


def test_kafka_pythons_admin_client_creates_and_describes_a_topic(kc: Cluster) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient, NewTopic
    from kafka.errors import InvalidReplicationFactorError, TopicAlreadyExistsError

    admin = KafkaAdminClient(bootstrap_servers=kafka_bootstrap(kc).split(","))
    try:
        created = admin.create_topics(
            [NewTopic("made", 3, 3, topic_configs={"min.insync.replicas": "2"})],
            timeout_ms=30_000,
        )
        assert [t["error_code"] for t in created["topics"]] == [0]
        (described,) = admin.describe_topics(["made"])
        assert len(described["partitions"]) == 3
        assert all(len(p["isr_nodes"]) == 3 for p in described["partitions"])
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "made")])
        assert configs["topic"]["made"]["min.insync.replicas"]["value"] == "2"
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topics([NewTopic("made", 1, 1)])
        with pytest.raises(InvalidReplicationFactorError):
            admin.create_topics([NewTopic("wide", 1, 4)])
    finally:
        admin.close()
