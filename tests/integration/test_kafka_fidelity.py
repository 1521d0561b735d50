"""Kafka 2.6 behaviours that clients met (issue 38), tried as a Kafka client's own tests would,
with unmodified clients or Kafka's own frames on the brokers' KAFKA listeners; each cites the
Kafka source it follows:
- an offset commit for a topic that does not exist is refused (KafkaApis.scala,
  handleOffsetCommitRequest; KafkaApisTest.testOffsetCommitWithInvalidPartition);
- ListOffsets by timestamp finds the first record, not batch, at or after it (LogSegment.scala
  findOffsetByTimestamp, FileRecords.searchForTimestamp)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from minibroker.core.errors import ErrorCode
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import (
    create_topic,
    kafka_bootstrap,
    read_frame,
    request_bytes,
)

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0


@pytest.fixture(scope="module")
def fc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("fidelity") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1", "--set", "group.initial.rebalance.delay.ms=300"
    ) as c:
        yield c


def call(s: socket.socket, request: Any, version: int, response: Any) -> Any:
    s.sendall(request_bytes(request, version))
    return response.decode(read_frame(s), version=version, header=True, framed=True)


# ---- OffsetCommit -----------------------------------------------------------------------------


def test_an_offset_commit_for_a_topic_that_does_not_exist_is_refused(fc: Cluster) -> None:
    """librdkafka raises the partition's error for the commit; the existing topic's offset is
    stored, the missing one's is not (committed() reads back no offset for it)."""
    from confluent_kafka import Consumer, KafkaException
    from confluent_kafka import TopicPartition as TP

    create_topic(fc, "committed", partitions=1)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(fc), "group.id": "commit-nt",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        offsets = [TP("committed", 0, 3), TP("no-such-topic", 0, 5)]
        with pytest.raises(KafkaException) as refused:
            consumer.commit(offsets=offsets, asynchronous=False)
        assert refused.value.args[0].code() == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        got = consumer.committed([TP("committed", 0), TP("no-such-topic", 0)], timeout=30)
        assert [(t.topic, t.offset) for t in got] == [("committed", 3), ("no-such-topic", -1001)]
    finally:
        consumer.close()


# ---- ListOffsets by timestamp -----------------------------------------------------------------


def test_offsets_for_times_finds_the_record_not_its_batch(fc: Cluster) -> None:
    """Issue 38's case: two records of one batch, timestamps 1234 and 999999999999."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as TP
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    # Records from 1970 and 2001 are past any time retention: this topic keeps them.
    fc.cli("topics", "create", "stamped", "--partitions", "1", "--replication-factor", "3",
           "--config", "retention.ms=-1", "--wait")  # fmt: skip
    producer = Producer({"bootstrap.servers": kafka_bootstrap(fc), "acks": "all",
                         "linger.ms": 200})  # fmt: skip
    for ts in (1234, 999_999_999_999):  # one linger: one batch
        producer.produce("stamped", value=b"at %d" % ts, partition=0, timestamp=ts)
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(fc), "group.id": "times"})
    try:
        found = {  # one look-up a call: librdkafka keeps one timestamp per partition
            ts: consumer.offsets_for_times([TP("stamped", 0, ts)], timeout=30)[0].offset
            for ts in (999_999_999_999, 1235, 1234, 0, 10**12)
        }
        assert found == {999_999_999_999: 1, 1235: 1, 1234: 0, 0: 0, 10**12: -1}
    finally:
        consumer.close()
    with closing(KafkaConsumer(bootstrap_servers=kafka_bootstrap(fc).split(","))) as kc:
        tp = KafkaTP("stamped", 0)
        got = kc.offsets_for_times({tp: 999_999_999_999})[tp]
        assert (got.offset, got.timestamp) == (1, 999_999_999_999)
        got = kc.offsets_for_times({tp: 1000})[tp]
        assert (got.offset, got.timestamp) == (0, 1234)
