"""Consumer groups on the brokers' KAFKA listeners (issue 19): a confluent-kafka group of two
consumers shares an RF 3, 3-partition topic and rebalances when one leaves; committed offsets
survive and a new member resumes from them (kafka-python); and with the leader of a partition
SIGKILLed mid-stream, the producer (acks=all) and the group carry on by themselves, and every
acknowledged record is consumed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import closing

import pytest

from minibroker import localcluster
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import (
    create_topic,
    kafka_bootstrap,
    leader_of,
)
from tests.kafka_clients.stream import CONSUMER, stream_through

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0


@pytest.fixture
def gc(tmp_path: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path / "cluster"  # type: ignore[operator]
    with cluster_with_zk(
        d, "--controllers", "1", "--set", "group.initial.rebalance.delay.ms=300"
    ) as c:
        yield c


def partitions_of(consumer: object) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}  # type: ignore[attr-defined]


def test_a_group_of_two_shares_the_partitions_and_rebalances_when_one_leaves(gc: Cluster) -> None:
    from confluent_kafka import Consumer

    create_topic(gc, "shared")
    conf = {"bootstrap.servers": kafka_bootstrap(gc), "group.id": "two", **CONSUMER}
    with closing(Consumer(conf)) as first, closing(Consumer(conf)) as second:
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


def test_committed_offsets_outlive_the_consumer_and_a_new_member_resumes_there(
    gc: Cluster,
) -> None:
    from kafka import KafkaConsumer, KafkaProducer, OffsetAndMetadata, TopicPartition

    create_topic(gc, "resume", partitions=1)
    bootstrap = kafka_bootstrap(gc).split(",")
    with closing(KafkaProducer(bootstrap_servers=bootstrap, acks="all")) as producer:
        for i in range(20):
            producer.send("resume", b"r%d" % i)
        producer.flush(30)

    def consumer() -> closing[KafkaConsumer]:
        return closing(
            KafkaConsumer(
                "resume", bootstrap_servers=bootstrap, group_id="resumer",
                auto_offset_reset="earliest", enable_auto_commit=False, consumer_timeout_ms=4000,
                max_poll_records=10,
            )
        )  # fmt: skip

    first: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S
    with consumer() as c:
        while len(first) < 10:
            assert time.monotonic() < deadline, "the first member read nothing"
            batches = c.poll(timeout_ms=1000, max_records=10 - len(first))
            first += [m.value for records in batches.values() for m in records]
        c.commit({TopicPartition("resume", 0): OffsetAndMetadata(10, "", -1)})
    with consumer() as c:
        rest = [m.value for m in c]
    assert first == [b"r%d" % i for i in range(10)]
    assert rest == [b"r%d" % i for i in range(10, 20)]


def test_clients_carry_on_when_a_partition_leader_is_killed_mid_stream(gc: Cluster) -> None:
    create_topic(gc, "stream")

    def kill_leader() -> None:
        localcluster.send(gc.reload(), f"broker-{leader_of(gc, 'stream', 0)}", "kill")

    # After the kill: the session expires (6 s), the controller elects, clients find the leader.
    run = stream_through(kafka_bootstrap(gc), "stream", "survivors", kill_leader)
    assert not run.errors, f"the producer gave up on records: {run.errors[:3]}"
    assert len(run.acked) > 100
    missing = run.missing()
    assert not missing, f"{len(missing)} acknowledged records not consumed: {list(missing)[:5]}"
