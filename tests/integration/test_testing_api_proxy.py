"""The test bed's API on a cluster behind the fault proxy (issue 39 §1): Kafka clients reach
the KAFKA listeners through links of their own, so a Kafka client's link can be delayed or
cut like any other, and network faults by role return the links they changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from minibroker.testing import Cluster, leader_of

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(proxy=True) as c:
        c.create_topic("orders", partitions=1, replication_factor=3, min_insync_replicas=2)
        yield c


def kafka_bytes(c: Cluster) -> dict[str, int]:
    return {
        link.name: link.forward_bytes + link.backward_bytes
        for link in c.links()
        if link.name.startswith("kafka-client->")
    }


def round_trip(c: Cluster, n: int) -> list[bytes]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    p = Producer(c.confluent_config(acks="all", message_timeout_ms=60_000))
    errors: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce("orders", b"%d" % i, on_delivery=delivered)
    assert p.flush(90) == 0 and not errors, errors
    consumer = Consumer(c.confluent_config(group_id="reader", auto_offset_reset="earliest",
                                           enable_auto_commit=False))  # fmt: skip
    try:
        consumer.assign([TopicPartition("orders", 0, 0)])
        got: list[bytes] = []
        while len(got) < n:
            msg = consumer.poll(30)
            assert msg is not None, f"read {len(got)} of {n}"
            got.append(msg.value() or b"")
        return got
    finally:
        consumer.close()


def test_kafka_clients_go_through_links_of_their_own(cluster: Cluster) -> None:
    before = kafka_bytes(cluster)
    assert sorted(before) == [f"kafka-client->broker-{i}" for i in (1, 2, 3)]
    assert round_trip(cluster, 10) == [b"%d" % i for i in range(10)]
    after = kafka_bytes(cluster)
    leader = cluster.leader("orders", 0)
    assert after[f"kafka-client->broker-{leader}"] > before[f"kafka-client->broker-{leader}"]


def test_a_delay_on_the_clients_links_covers_kafka_clients(cluster: Cluster) -> None:
    delayed = cluster.delay(leader_of("orders", 0), 50, peers=("clients",))
    leader = delayed.node
    assert sorted(delayed.links) == [f"client->{leader}", f"kafka-client->{leader}"]
    faulted = {link.name: link for link in cluster.links()}
    assert faulted[f"kafka-client->{leader}"].forward.delay_ms == 50
    assert round_trip(cluster, 5)[:5] == [b"%d" % i for i in range(5)]  # slower, not broken
    healed = cluster.heal(leader)
    assert f"kafka-client->{leader}" in healed.links


def test_a_leader_cut_from_zookeeper_loses_its_leadership(cluster: Cluster) -> None:
    cut = cluster.cut_from_zookeeper(leader_of("orders", 0))
    assert cut.links == (f"{cut.node}->zookeeper",)
    elected = cluster.wait_for_new_leader("orders", 0)
    assert f"broker-{elected['leader']}" != cut.node
    cluster.heal(cut.node)
    replicated = cluster.wait_until_fully_replicated("orders", timeout_s=90)
    assert replicated["orders"][0].fully_replicated
