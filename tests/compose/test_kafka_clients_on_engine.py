"""Unmodified Kafka clients against the compose cluster's KAFKA_EXTERNAL listeners (issue 19):
confluent-kafka produces with acks=all on 127.0.0.1:9092-9094 while a group of two consumers
reads, the leader of a partition's container is killed as deploy/README.md's walkthrough kills
one, and every acknowledged record is consumed. The killed broker is started again after."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from minibroker import topology
from minibroker.runtime.waiting import wait_until
from tests.compose import engine
from tests.compose.test_cluster_on_engine import mb
from tests.kafka_clients.stream import stream_through

pytestmark = [pytest.mark.compose, pytest.mark.integration]

TOPIC = "kafka-clients"


def is_healthy(client: Any, service: str) -> bool:
    return engine.health(client, service) == "healthy"


def test_kafka_clients_carry_on_when_a_leader_container_is_killed(
    client: Any, up_seconds: float
) -> None:
    mb("topics", "create", TOPIC, "--partitions", "3", "--replication-factor", "3",
       "--config", "min.insync.replicas=2", "--wait", "--zk", engine.ZK)  # fmt: skip
    killed: list[str] = []

    def kill_leader() -> None:
        out = mb("cluster", "kill", "leader", "--topic", TOPIC, "--compose", engine.PROJECT)
        killed.append(out.stdout.split()[1])  # "kill: broker-N (...)"

    try:
        run = stream_through(
            topology.bootstrap_kafka_external(), TOPIC, "compose-group", kill_leader
        )
    finally:
        # Only the killed broker is waited for: the walkthrough leaves a killed controller down.
        for name in killed:
            mb("cluster", "start", name, "--compose", engine.PROJECT)
            wait_until(
                functools.partial(is_healthy, client, name),
                timeout_s=90,
                what=f"{name} healthy again",
            )
    assert killed, "no leader was killed"
    assert not run.errors, f"the producer gave up on records: {run.errors[:3]}"
    assert len(run.acked) > 100
    missing = run.missing()
    assert not missing, f"{len(missing)} acknowledged records not consumed: {list(missing)[:5]}"
