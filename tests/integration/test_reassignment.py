"""Partition reassignment on real processes (issue 26 §1-§2), as Kafka 2.6 does it in ZooKeeper
mode: through the AlterPartitionReassignments API (kafka-python's admin client), the legacy
/admin/reassign_partitions znode and `minibroker topics reassign`; throttled, cancelled, and
through the faults Kafka's own tests put it through. Mirrors ReassignPartitionsIntegrationTest
(testReassignment, testLegacyReassignment, testThrottledReassignment, testCancellation),
PlaintextAdminIntegrationTest (testInvalidAlterPartitionReassignments,
testListReassignmentsDoesNotShowNonReassigningPartitions) and ControllerIntegrationTest
(testPartitionReassignmentWithOfflineReplicaHaltingProgress,
testPartitionReassignmentResumesAfterReplicaComesOnline,
testControllerMoveOnPartitionReassignment)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from minibroker.client import Producer
from minibroker.client.read_back import read_partition
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ReassignPartitionsZNode, TopicZNode
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import kafka_bootstrap

pytestmark = pytest.mark.integration

SLOW = "1000"  # bytes/s: a new replica of 300 KB cannot catch up while throttled


@pytest.fixture(scope="module")
def rc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("reassignment") / "cluster"
    with cluster_with_zk(
        d, "--set", "zookeeper.session.timeout.ms=3000",
        "--set", "minibroker.isr.change.propagation.blackout.ms=500",
        "--set", "minibroker.isr.change.propagation.interval.ms=250",
        # A follower fetches at most 64 KiB of a partition at a time, so that a throttled new
        # replica is held back after its first fetch (Kafka's quota is checked before a read
        # and counts the bytes after it: the first fetch always goes through).
        "--set", "replica.fetch.max.bytes=65536",
    ) as c:  # fmt: skip
        yield c


def admin_client(c: Cluster) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=kafka_bootstrap(c).split(","))


def topic_on(c: Cluster, topic: str, replicas: list[int], records: int = 200) -> dict[int, bytes]:
    """A one-partition topic with these replicas and `records` acknowledged 1 KiB records."""
    c.cli("topics", "create", topic, "--partitions", "1", "--replication-factor",
          str(len(replicas)), "--wait")  # fmt: skip
    assignment = TopicZNode.decode(topic, c.zk.get(TopicZNode.path(topic))[0])
    if list(assignment.partitions[0]) != replicas:  # place it where the test wants it
        move(c, topic, replicas)
        wait_until(lambda: not reassigning(c, topic), timeout_s=60, what=f"{topic} placed")
    return produce(c, topic, records)


def produce(c: Cluster, topic: str, records: int, start: int = 0) -> dict[int, bytes]:
    async def run() -> dict[int, bytes]:
        bootstrap = [p.address for p in c.reload().by_role("broker")]
        async with Producer(bootstrap, acks=-1, linger_ms=5) as p:
            values = [b"%06d" % i + b"x" * 1018 for i in range(start, start + records)]
            futures = [await p.send(topic, v, partition=0) for v in values]
            sent = await asyncio.gather(*futures)
        return {md.offset: v for md, v in zip(sent, values, strict=True)}

    return asyncio.run(run())


def read_all(c: Cluster, topic: str) -> dict[int, bytes | None]:
    bootstrap = [p.address for p in c.reload().by_role("broker")]
    return asyncio.run(read_partition(bootstrap, TopicPartition(topic, 0)))


def move(c: Cluster, topic: str, replicas: list[int] | None) -> None:
    from kafka import TopicPartition as KafkaTP

    with closing(admin_client(c)) as admin:
        admin.alter_partition_reassignments({KafkaTP(topic, 0): replicas}, timeout_ms=30_000)


def assignment_json(c: Cluster, topic: str) -> dict[str, Any]:
    data, _ = c.zk.get(TopicZNode.path(topic))
    parsed: dict[str, Any] = json.loads(data or b"{}")
    return parsed


def reassigning(c: Cluster, topic: str) -> bool:
    got = assignment_json(c, topic)
    return bool(got.get("adding_replicas") or got.get("removing_replicas"))


def state(c: Cluster, topic: str) -> dict[str, Any]:
    data, _ = c.zk.get(f"/brokers/topics/{topic}/partitions/0/state")
    parsed: dict[str, Any] = json.loads(data or b"{}")
    return parsed


def throttle(c: Cluster, topic: str, rate: str | None) -> None:
    """Throttle every replica of `topic` on every broker at `rate` (None: remove, if set)."""
    if rate is None:
        c.cli("configs", "--entity-type", "brokers", "--entity-default", "--alter",
              "--delete-config", "leader.replication.throttled.rate,"
              "follower.replication.throttled.rate", check=False)  # fmt: skip
        c.cli("configs", "--entity-type", "topics", "--entity-name", topic, "--alter",
              "--delete-config", "leader.replication.throttled.replicas,"
              "follower.replication.throttled.replicas", check=False)  # fmt: skip
        return
    c.cli(
        "configs",
        "--entity-type",
        "brokers",
        "--entity-default",
        "--alter",
        "--add-config",
        f"leader.replication.throttled.rate={rate},follower.replication.throttled.rate={rate}",
    )
    c.cli("configs", "--entity-type", "topics", "--entity-name", topic, "--alter",
          "--add-config", "leader.replication.throttled.replicas=*,"
          "follower.replication.throttled.replicas=*")  # fmt: skip


def controller_events(c: Cluster, name: str) -> list[dict[str, Any]]:
    out = []
    for p in c.reload().by_role("controller"):
        out += [e for e in c.log_events(p.name) if e["event"] == name]
    return out


def test_a_throttled_move_shows_ar_isr_osr_and_completes_when_released(rc: Cluster) -> None:
    acked = topic_on(rc, "moving", [1, 2], records=300)
    throttle(rc, "moving", SLOW)
    move(rc, "moving", [3, 2])  # broker 3 joins, broker 1 (the leader) leaves
    # Mid-way, as Kafka writes it: RS = TRS ++ ORS with adding/removing, version 2 JSON.
    assert assignment_json(rc, "moving") == {
        "version": 2,
        "partitions": {"0": [3, 2, 1]},
        "adding_replicas": {"0": [3]},
        "removing_replicas": {"0": [1]},
    }
    from kafka import TopicPartition as KafkaTP

    with closing(admin_client(rc)) as admin:
        listed = admin.list_partition_reassignments()
    assert KafkaTP("moving", 0) in listed or ("moving", 0) in listed
    # The new replica is a follower outside the ISR while throttled.
    assert 3 not in state(rc, "moving")["isr"]
    more = produce(rc, "moving", 50, start=300)  # acks=all goes on: ISR {1, 2}
    throttle(rc, "moving", None)
    wait_until(lambda: not reassigning(rc, "moving"), timeout_s=60, what="the move to finish")
    assert assignment_json(rc, "moving")["partitions"] == {"0": [3, 2]}
    final = state(rc, "moving")
    assert final["leader"] in (3, 2) and set(final["isr"]) <= {2, 3}
    got = read_all(rc, "moving")
    assert all(got.get(o) == v for o, v in {**acked, **more}.items())
    b1 = rc.reload().process("broker-1")
    wait_until(lambda: not list((Path(b1.data_dir) / "data").glob("moving-*")), timeout_s=20,
               what="broker 1's replica to be deleted")  # fmt: skip
    kinds = {e["event"] for e in controller_events(rc, "reassignment_started")}
    assert kinds == {"reassignment_started"}
    assert any(e["tp"] == "moving-0" for e in controller_events(rc, "reassignment_completed"))
    assert any(e["replica"] == 1 for e in controller_events(rc, "replica_removed"))


def test_the_legacy_znode_moves_a_partition_and_is_deleted(rc: Cluster) -> None:
    acked = topic_on(rc, "legacy", [1, 2], records=20)
    rc.zk.create(
        ReassignPartitionsZNode.path,
        json.dumps({"version": 1, "partitions": [
            {"topic": "legacy", "partition": 0, "replicas": [2, 3]}]}).encode(),
        makepath=True,
    )  # fmt: skip
    wait_until(lambda: rc.zk.exists(ReassignPartitionsZNode.path) is None, timeout_s=60,
               what="the controller to finish and delete /admin/reassign_partitions")  # fmt: skip
    assert assignment_json(rc, "legacy")["partitions"] == {"0": [2, 3]}
    got = read_all(rc, "legacy")
    assert all(got.get(o) == v for o, v in acked.items())


def test_invalid_reassignments_are_refused_as_kafka_refuses_them(rc: Cluster) -> None:
    from kafka import TopicPartition as KafkaTP
    from kafka.errors import (
        InvalidReplicationAssignmentError,
        NoReassignmentInProgressError,
        UnknownTopicOrPartitionError,
    )

    topic_on(rc, "checked", [1, 2], records=1)
    cases: list[tuple[dict[Any, list[int] | None], type[Exception]]] = [
        # (An empty list kafka-python refuses itself; the unit tests cover the broker's.)
        ({KafkaTP("checked", 0): [1, -1]}, InvalidReplicationAssignmentError),
        ({KafkaTP("checked", 0): [1, 1]}, InvalidReplicationAssignmentError),
        ({KafkaTP("checked", 0): [1, 9]}, InvalidReplicationAssignmentError),  # 9: not alive
        ({KafkaTP("checked", 0): None}, NoReassignmentInProgressError),
        ({KafkaTP("checked", 7): [1, 2]}, UnknownTopicOrPartitionError),
    ]
    with closing(admin_client(rc)) as admin:
        for request, error in cases:
            (tp,) = request
            assert admin.alter_partition_reassignments(request) == {tp: error}
    assert assignment_json(rc, "checked")["partitions"] == {"0": [1, 2]}


def test_cancelling_a_move_returns_to_the_original_replicas(rc: Cluster) -> None:
    topic_on(rc, "cancelled", [1, 2], records=300)
    throttle(rc, "cancelled", SLOW)
    try:
        move(rc, "cancelled", [1, 3])
        assert reassigning(rc, "cancelled")
        move(rc, "cancelled", None)
        assert assignment_json(rc, "cancelled")["partitions"] == {"0": [1, 2]}
        assert not reassigning(rc, "cancelled")
    finally:
        throttle(rc, "cancelled", None)
    assert any(e["tp"] == "cancelled-0" for e in controller_events(rc, "reassignment_cancelled"))
    b3 = rc.reload().process("broker-3")
    wait_until(lambda: not list((Path(b3.data_dir) / "data").glob("cancelled-*")), timeout_s=20,
               what="the cancelled new replica to be deleted")  # fmt: skip


def test_a_move_waits_for_a_killed_new_replica_and_finishes_when_it_returns(rc: Cluster) -> None:
    # ControllerIntegrationTest.testPartitionReassignmentWithOfflineReplicaHaltingProgress:
    # the target broker is down when the move is written to the znode (only the API checks
    # that adding replicas are alive).
    acked = topic_on(rc, "waiting", [1, 2], records=100)
    rc.cli("cluster", "kill", "broker-3")
    try:
        wait_until(lambda: rc.zk.exists("/brokers/ids/3") is None, timeout_s=30,
                   what="broker 3's session to expire")  # fmt: skip
        rc.zk.create(
            ReassignPartitionsZNode.path,
            ReassignPartitionsZNode.encode({TopicPartition("waiting", 0): [2, 3]}),
            makepath=True,
        )
        wait_until(lambda: reassigning(rc, "waiting"), timeout_s=30, what="the move to start")
        more = produce(rc, "waiting", 20, start=100)  # the old replicas keep serving
        assert reassigning(rc, "waiting")  # ...and the move waits for broker 3
    finally:
        rc.cli("cluster", "start", "broker-3")
    wait_until(lambda: not reassigning(rc, "waiting"), timeout_s=90,
               what="the move to finish once broker 3 is back")  # fmt: skip
    assert assignment_json(rc, "waiting")["partitions"] == {"0": [2, 3]}
    # B7 follows B6: the partition leaves the znode (deleted when empty) right after.
    wait_until(lambda: rc.zk.exists(ReassignPartitionsZNode.path) is None, timeout_s=10,
               what="/admin/reassign_partitions deleted")  # fmt: skip
    got = read_all(rc, "waiting")
    assert all(got.get(o) == v for o, v in {**acked, **more}.items())


def test_a_new_controller_resumes_a_move_under_acks_all_load(rc: Cluster) -> None:
    acked = topic_on(rc, "resumed", [1, 2], records=300)
    stop = threading.Event()
    loaded: dict[int, bytes] = {}

    def load() -> None:
        i = 1000
        while not stop.is_set():
            loaded.update(produce(rc, "resumed", 10, start=i))
            i += 10

    throttle(rc, "resumed", SLOW)
    active = -1
    worker = threading.Thread(target=load)
    worker.start()
    try:
        move(rc, "resumed", [3, 2])
        active = rc.zk.read_controller() or -1
        rc.cli("cluster", "kill", f"controller-{active - 100}")
        wait_until(lambda: rc.zk.read_controller() not in (None, active), timeout_s=30,
                   what="the standby controller to take over")  # fmt: skip
        throttle(rc, "resumed", None)
        wait_until(lambda: not reassigning(rc, "resumed"), timeout_s=90,
                   what="the new controller to finish the move")  # fmt: skip
    finally:
        stop.set()
        worker.join(60)
        throttle(rc, "resumed", None)
        if active > 0:
            rc.cli("cluster", "start", f"controller-{active - 100}", check=False)
    assert assignment_json(rc, "resumed")["partitions"] == {"0": [3, 2]}
    got = read_all(rc, "resumed")
    lost = {o for o, v in {**acked, **loaded}.items() if got.get(o) != v}
    assert not lost, f"acknowledged records lost: {sorted(lost)[:10]}"


def test_the_cli_generates_executes_throttles_and_verifies(rc: Cluster, tmp_path: Path) -> None:
    topic_on(rc, "tooled", [1, 2], records=50)
    out = rc.cli("topics", "reassign", "--generate", "--topics", "tooled",
                 "--broker-list", "2,3").stdout  # fmt: skip
    proposed = out.strip().splitlines()[-1]
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": "tooled", "partition": 0, "replicas": [3, 2]}]}))  # fmt: skip
    assert json.loads(proposed)["partitions"][0]["topic"] == "tooled"
    rc.cli("topics", "reassign", "--execute", "--reassignment-json-file", str(plan),
           "--throttle", "10000000")  # fmt: skip
    config = json.loads(rc.cli("configs", "--entity-type", "topics", "--entity-name", "tooled",
                               "--describe", "--json").stdout)  # fmt: skip
    assert config["leader.replication.throttled.replicas"] == "0:1,0:2"
    assert config["follower.replication.throttled.replicas"] == "0:3"

    def verified() -> bool:
        return rc.cli("topics", "reassign", "--verify", "--reassignment-json-file", str(plan),
                      check=False).returncode == 0  # fmt: skip

    wait_until(verified, timeout_s=60, what="--verify to report the move done")
    config = json.loads(rc.cli("configs", "--entity-type", "topics", "--entity-name", "tooled",
                               "--describe", "--json").stdout)  # fmt: skip
    assert "leader.replication.throttled.replicas" not in config  # --verify removed them
