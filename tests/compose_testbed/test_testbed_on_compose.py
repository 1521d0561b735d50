"""The test bed's Python API on the compose cluster (`Cluster(compose=True)`, issue 39 §1): the
containers of deploy/docker-compose.yml under a compose project of the test's own, settings
by Kafka's names reaching every container, unmodified Kafka clients through its configs,
faults by role on containers (kill, isolate), waits that return the event from the containers'
logs, the failure report, and nothing left of the project afterwards. A package of its own:
it runs after tests/compose and tests/compose_secure have taken their clusters down (the
compose clusters publish the same ports)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.core.event_kinds import is_routine_event
from minibroker.history import HistoryRecorder, check, load
from minibroker.testing import Cluster, follower_of, leader_of
from minibroker.testing.failure_report import failure_report
from tests.compose import engine

PROJECT = "mbtestbed"
SETTINGS = {"replica.lag.time.max.ms": 3000, "zookeeper.session.timeout.ms": 6000}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    client = engine.engine_or_skip()
    engine.run_block("build", engine.block_env(tmp_path_factory.mktemp("shims")), timeout=3600)
    c = Cluster(compose=True, project=PROJECT, compose_file=engine.COMPOSE_FILE, settings=SETTINGS)
    try:
        with c:
            c.create_topic("orders", partitions=2, replication_factor=3, min_insync_replicas=2)
            yield c
    finally:
        assert engine.leftovers(client, PROJECT) == [], (
            "left behind by Cluster(compose=True).down()"
        )


@pytest.fixture(scope="module")
def histories(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's recorded client histories, checked together."""
    return tmp_path_factory.mktemp("histories")


def produce(recorder: HistoryRecorder, c: Cluster, first: int, n: int) -> None:
    producer = recorder.producer(c.confluent_config(acks="all", message_timeout_ms=60_000))
    for i in range(first, first + n):
        producer.produce("orders", b"order-%d" % i, partition=i % 2)
    assert producer.flush(90) == 0


def test_settings_reach_the_containers_and_kafka_clients_write(
    cluster: Cluster, histories: Path
) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._config import ConfigResource

    assert cluster.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert cluster.zookeeper_connect == "127.0.0.1:2181"
    assert sorted(cluster.nodes) == sorted(
        ["zookeeper", "broker-1", "broker-2", "broker-3", "controller-1", "controller-2"]
    )
    admin = AdminClient(cluster.confluent_config())
    (future,) = admin.describe_configs([ConfigResource("broker", "2")]).values()
    configs = future.result(timeout=30)
    assert configs["replica.lag.time.max.ms"].value == "3000"
    assert configs["zookeeper.session.timeout.ms"].value == "6000"

    with HistoryRecorder(histories / "before.jsonl") as recorder:
        produce(recorder, cluster, 0, 50)
    state = cluster.partition("orders", 0)
    assert state.fully_replicated and state.high_watermark == 25
    assert {r.log_end_offset for r in state.replica_states.values()} == {25}


def test_a_killed_leader_container_is_replaced_and_nothing_acknowledged_is_lost(
    cluster: Cluster, histories: Path
) -> None:
    leader = cluster.leader("orders", 0)
    killed = cluster.kill(leader_of("orders", 0))
    assert killed.node == f"broker-{leader}" and killed.where.startswith("container ")
    elected = cluster.wait_for_new_leader("orders", 0, timeout_s=60)
    assert elected.kind == "leader_elected" and elected["leader"] != leader
    assert elected.ts_ms >= killed.at_ms
    with HistoryRecorder(histories / "after.jsonl") as recorder:
        produce(recorder, cluster, 50, 50)  # min.insync.replicas 2 of the 2 left
    cluster.start(killed.node)
    replicated = cluster.wait_until_fully_replicated("orders", timeout_s=120)
    assert all(p.fully_replicated for p in replicated["orders"])

    with HistoryRecorder(histories / "read.jsonl") as recorder:
        consumer = recorder.consumer(
            cluster.confluent_config(group_id="audit", auto_offset_reset="earliest")
        )
        consumer.subscribe(["orders"])
        deadline = time.monotonic() + 60
        seen = 0
        while seen < 100 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            seen += m is not None and m.error() is None
        consumer.close()
    result = check(load(sorted(histories.glob("*.jsonl"))),
                   timeline=cluster.events())  # fmt: skip
    assert result.ok, result.text()
    assert seen == 100


def test_an_isolated_follower_container_leaves_the_isr_and_comes_back(
    cluster: Cluster, histories: Path
) -> None:
    cut = cluster.isolate(follower_of("orders", 1))
    assert cut.links, cut  # the container's links it cut
    with HistoryRecorder(histories / "isolated.jsonl") as recorder:
        produce(recorder, cluster, 100, 10)  # records the follower does not fetch
    shrink = cluster.wait_for_isr_shrink("orders", 1, timeout_s=60)
    follower = int(cut.node.removeprefix("broker-"))
    assert follower not in shrink["isr"]
    cluster.heal(cut.node)
    assert cluster.wait_for_isr_expand("orders", 1, since=shrink.ts_ms, timeout_s=90)


def test_the_failure_report_reads_the_containers(cluster: Cluster) -> None:
    report = failure_report(cluster, cluster.started_ms)
    assert report.startswith(f"compose project '{PROJECT}'")
    assert "broker-1" in report and "container " in report
    assert "orders-0: replicas" in report
    assert "timeline since the test started" in report
    # The timeline holds the latest events (EVENTS of them): the cluster's latest before the
    # report was read is among them. (The isolated follower's return may not be: the churn of
    # __consumer_offsets' 50 partitions after it can outnumber EVENTS, as in a CI run.)
    latest = [e for e in cluster.events(cluster.started_ms) if e.kind != "log"
              if not is_routine_event(e.kind, e.get("cause"))][-1]  # fmt: skip
    report = failure_report(cluster, cluster.started_ms)
    assert f"  {latest}" in report, latest
    assert "controller-1's last log lines:" in report
