"""Unmodified Kafka clients against the compose cluster's KAFKA_EXTERNAL listeners (issue 19):
confluent-kafka produces with acks=all on 127.0.0.1:9092-9094 while a group of two consumers
reads, the leader of a partition's container is killed as deploy/README.md's walkthrough kills
one, and every acknowledged record is consumed. The killed broker is started again after."""

from __future__ import annotations

from typing import Any

import pytest

from minibroker import topology
from tests.compose import engine
from tests.kafka_clients.stream import stream_through

pytestmark = [pytest.mark.compose, pytest.mark.integration]

TOPIC = "kafka-clients"


def test_kafka_clients_carry_on_when_a_leader_container_is_killed(
    client: Any, up_seconds: float
) -> None:
    engine.mb("topics", "create", TOPIC, "--partitions", "3", "--replication-factor", "3",
              "--config", "min.insync.replicas=2", "--wait", "--zk", engine.ZK)  # fmt: skip
    with engine.leader_killer(client, TOPIC) as kill_leader:
        run = stream_through(
            topology.bootstrap_kafka_external(), TOPIC, "compose-group", kill_leader
        )
    assert not run.errors, f"the producer gave up on records: {run.errors[:3]}"
    assert len(run.acked) > 100
    missing = run.missing()
    assert not missing, f"{len(missing)} acknowledged records not consumed: {list(missing)[:5]}"
