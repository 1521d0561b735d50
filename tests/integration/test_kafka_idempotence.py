"""Idempotent producers on the KAFKA listeners (issue 19; reference §8.4 item 6): librdkafka's
idempotent producer writes while the leader of a partition is SIGKILLed; afterwards every
acknowledged record is in the log at its offset, no record is in it twice, and each partition
holds the producer's records in the order it sent them (the brokers' sequence checks, Kafka
2.6's ProducerStateManager rules in broker/log/producer_state.py)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from minibroker import localcluster
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import (
    assert_all_acked_read_back,
    create_topic,
    kafka_bootstrap,
    leader_of,
)

pytestmark = pytest.mark.integration

TOPIC = "idem"


@pytest.fixture
def ic(tmp_path: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path / "cluster"  # type: ignore[operator]
    with cluster_with_zk(d, "--controllers", "1") as c:
        yield c


def log_of(bootstrap: str, partitions: int) -> list[tuple[int, int, bytes]]:
    """Every record of the topic up to each partition's high watermark."""
    from confluent_kafka import Consumer, TopicPartition

    conf = {"bootstrap.servers": bootstrap, "group.id": "reader", "enable.auto.commit": False}
    read: list[tuple[int, int, bytes]] = []
    with closing(Consumer(conf)) as consumer:
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)[1]
            for p in range(partitions)
        }
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(partitions)])
        deadline = time.monotonic() + 60
        while len(read) < sum(ends.values()):
            assert time.monotonic() < deadline, f"read {len(read)} of {sum(ends.values())}"
            for m in consumer.consume(num_messages=1000, timeout=0.5):
                if m.error() is None:
                    read.append((m.partition() or 0, m.offset() or 0, m.value() or b""))
    return read


def test_an_idempotent_producer_through_a_leader_kill_writes_each_record_once_in_order(
    ic: Cluster,
) -> None:
    from confluent_kafka import Producer

    create_topic(ic, TOPIC)
    bootstrap = kafka_bootstrap(ic)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5}
    )
    acked: dict[tuple[int, int], bytes] = {}
    errors: list[Any] = []
    stop = threading.Event()

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            acked[(msg.partition(), msg.offset())] = msg.value()

    def produce() -> None:
        i = 0
        while not stop.is_set():
            producer.produce(TOPIC, b"%d" % i, key=b"k%d" % (i % 30), callback=delivered)
            producer.poll(0.002)
            i += 1
        producer.flush(60)

    def acked_per_partition() -> Counter[int]:
        return Counter(p for p, _ in list(acked))

    writer = threading.Thread(target=produce)
    writer.start()
    try:
        wait_until(
            lambda: min(acked_per_partition()[p] for p in range(3)) >= 200,
            timeout_s=60,
            what="acks on every partition before the kill",
        )
        victim = leader_of(ic, TOPIC, 0)
        before = acked_per_partition()
        localcluster.send(ic.reload(), f"broker-{victim}", "kill")
        # Through session expiry, the election and the producer's retries, until every
        # partition (partition 0 from its new leader) took 500 more records.
        wait_until(
            lambda: all(acked_per_partition()[p] >= before[p] + 500 for p in range(3)),
            timeout_s=90,
            what="acks on every partition after the kill",
        )
    finally:
        stop.set()
        writer.join(90)
    assert not errors, f"the producer failed records: {errors[:3]}"
    log = log_of(bootstrap, 3)
    assert_all_acked_read_back(acked, log)
    twice = [v for v, n in Counter(v for _, _, v in log).items() if n > 1]
    assert not twice, f"{len(twice)} records are in the log more than once: {twice[:5]}"
    for p in range(3):
        sent_order = [int(v) for q, _, v in sorted(log) if q == p]
        assert sent_order == sorted(sent_order), f"partition {p} holds records out of order"
