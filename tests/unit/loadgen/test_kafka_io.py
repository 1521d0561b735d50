"""The data source's Kafka-protocol write path, without a cluster: the sink's options become
kafka-python's settings, and a record's failure is named in the ledger as Kafka names it."""

from __future__ import annotations

import pytest
from kafka.errors import KafkaTimeoutError, NotEnoughReplicasError, NotLeaderForPartitionError

from loadgen.kafka_io import KafkaClientError, producer_config
from loadgen.source_io import Ledger, OutRecord
from loadgen.source_options import MinibrokerSourceError, parse_write_options

BOOT = "127.0.0.1:9092,127.0.0.1:9093"


def test_the_protocol_option_is_grpc_unless_kafka_is_asked_for() -> None:
    base = {"bootstrap": BOOT, "topic": "t"}
    assert parse_write_options(base, has_topic_column=False).protocol == "grpc"
    got = parse_write_options({**base, "PROTOCOL": "Kafka"}, has_topic_column=False)
    assert got.protocol == "kafka"
    with pytest.raises(MinibrokerSourceError, match="'protocol' must be grpc or kafka"):
        parse_write_options({**base, "protocol": "amqp"}, has_topic_column=False)


@pytest.mark.parametrize(("acks", "kafka_acks", "idempotent"), [("all", "all", True),
                         ("1", 1, False), ("0", 0, False)])  # fmt: skip
def test_kafka_pythons_settings_follow_the_sinks_options(
    acks: str, kafka_acks: object, idempotent: bool
) -> None:
    options = parse_write_options(
        {"bootstrap": BOOT, "topic": "t", "acks": acks, "linger.ms": "7", "max.block.ms": "900"},
        has_topic_column=False,
    )
    config = producer_config(options)
    assert config["bootstrap_servers"] == ["127.0.0.1:9092", "127.0.0.1:9093"]
    assert (config["acks"], config["enable_idempotence"]) == (kafka_acks, idempotent)
    assert (config["linger_ms"], config["max_block_ms"], config["batch_size"]) == (7, 900, 16384)
    assert (config["request_timeout_ms"], config["delivery_timeout_ms"]) == (30000, 120000)


def test_a_failed_record_is_named_by_kafkas_error_code_else_by_the_clients_exception() -> None:
    ledger = Ledger()
    record = OutRecord("t", None, b"k", b"v")
    for exc in (NotEnoughReplicasError(), NotLeaderForPartitionError(), KafkaTimeoutError()):
        ledger.add(record, None, 1, 2, KafkaClientError(exc))
    assert ledger.error == ["NOT_ENOUGH_REPLICAS", "NOT_LEADER_OR_FOLLOWER", "KafkaTimeoutError"]
    assert ledger.acked == 0 and ledger.offset == [-1, -1, -1]
