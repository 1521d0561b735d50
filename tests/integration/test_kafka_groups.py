"""Consumer groups on the brokers' KAFKA listeners (issue 19): a confluent-kafka group of two
consumers shares an RF 3, 3-partition topic and rebalances when one leaves; committed offsets
survive and a new member resumes from them (kafka-python); and with the leader of a partition
SIGKILLed mid-stream, the producer (acks=all) and the group carry on by themselves, and every
acknowledged record is consumed."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from minibroker import localcluster
from minibroker.runtime.zk_store import ZkStore
from tests.integration.conftest import Cluster, running_cluster
from tests.integration.kafka_wire import (
    assert_all_acked_read_back,
    create_topic,
    kafka_bootstrap,
    leader_of,
)

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0
CONSUMER = {
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 500,
}


@pytest.fixture
def gc(tmp_path: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path / "cluster"  # type: ignore[operator]
    with running_cluster(
        d, "--controllers", "1", "--set", "group.initial.rebalance.delay.ms=300"
    ) as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        zk.start()
        try:
            yield Cluster(d, state, zk)
        finally:
            zk.stop()


def consumed(consumer: object) -> list[tuple[int, int, bytes]]:
    """What one consume() call brings (a batch, not a record per call: a member without
    records must not slow the other down)."""
    msgs = consumer.consume(num_messages=1000, timeout=0.05)  # type: ignore[attr-defined]
    return [
        (m.partition() or 0, m.offset() or 0, m.value() or b"") for m in msgs if m.error() is None
    ]


def partitions_of(consumer: object) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}  # type: ignore[attr-defined]


def test_a_group_of_two_shares_the_partitions_and_rebalances_when_one_leaves(gc: Cluster) -> None:
    from confluent_kafka import Consumer

    create_topic(gc, "shared")
    conf = {"bootstrap.servers": kafka_bootstrap(gc), "group.id": "two", **CONSUMER}
    first, second = Consumer(conf), Consumer(conf)
    first.subscribe(["shared"])
    second.subscribe(["shared"])
    deadline = time.monotonic() + DEADLINE_S
    while not (partitions_of(first) and partitions_of(second)):
        assert time.monotonic() < deadline, "the two members never both got partitions"
        first.poll(0.1)
        second.poll(0.1)
    assert partitions_of(first) | partitions_of(second) == {0, 1, 2}
    assert not partitions_of(first) & partitions_of(second)
    second.close()  # LeaveGroup: the rest of the group rebalances at once
    while partitions_of(first) != {0, 1, 2}:
        assert time.monotonic() < deadline, "the remaining member never got every partition"
        first.poll(0.1)
    first.close()


def test_committed_offsets_outlive_the_consumer_and_a_new_member_resumes_there(
    gc: Cluster,
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    create_topic(gc, "resume", partitions=1)
    bootstrap = kafka_bootstrap(gc).split(",")
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    for i in range(20):
        producer.send("resume", b"r%d" % i)
    producer.flush(30)

    def consumer() -> KafkaConsumer:
        return KafkaConsumer(
            "resume", bootstrap_servers=bootstrap, group_id="resumer",
            auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=4000,
            max_poll_records=10,
        )  # fmt: skip

    c = consumer()
    first: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    while len(first) < 10:
        assert time.monotonic() < deadline, "the first member read nothing"
        batches = c.poll(timeout_ms=1000, max_records=10 - len(first))
        first += [m.value for records in batches.values() for m in records]
    c.commit({TopicPartition("resume", 0): OffsetAndMetadata(10, "", -1)})
    c.close()
    rest = [m.value for m in consumer()]
    assert first == [b"r%d" % i for i in range(10)]
    assert rest == [b"r%d" % i for i in range(10, 20)]


def test_clients_carry_on_when_a_partition_leader_is_killed_mid_stream(gc: Cluster) -> None:
    from confluent_kafka import Consumer, Producer

    create_topic(gc, "stream")
    bootstrap = kafka_bootstrap(gc)
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[object] = []
    stop = threading.Event()

    def produce() -> None:
        producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})

        def delivered(err: object, msg: object) -> None:
            if err is not None:
                errors.append(err)
            else:
                acked[(msg.partition(), msg.offset())] = msg.value()  # type: ignore[attr-defined]

        i = 0
        while not stop.is_set():
            producer.produce("stream", b"s%d" % i, callback=delivered)
            producer.poll(0.005)
            i += 1
        producer.flush(60)

    writer = threading.Thread(target=produce)
    writer.start()
    conf = {"bootstrap.servers": bootstrap, "group.id": "survivors", **CONSUMER}
    members = [Consumer(conf), Consumer(conf)]
    read: list[tuple[int, int, bytes]] = []
    try:
        for m in members:
            m.subscribe(["stream"])

        def drain(seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                for m in members:
                    read.extend(consumed(m))

        drain(4)
        localcluster.send(gc.reload(), f"broker-{leader_of(gc, 'stream', 0)}", "kill")
        drain(12)  # the session expires (6 s), the controller elects, clients find the leader
    finally:
        stop.set()
        writer.join(90)
    assert not errors, f"the producer gave up on records: {errors[:3]}"
    assert len(acked) > 100
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            assert_all_acked_read_back(acked, read)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            for m in members:
                read.extend(consumed(m))
    for m in members:
        m.close()
