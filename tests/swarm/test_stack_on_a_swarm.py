"""deploy/stack.yml on a swarm of three engines (issue 40 §2): ZooKeeper and each broker on the
node labelled for it, Kafka clients outside the swarm through each node's address and inside
it through the overlay's service names, and a whole machine dying: its broker's ZooKeeper
session expires, leaders move to the other machines, no acknowledged record is lost, and when
the machine comes back its broker rejoins with its data and returns to the ISR."""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

from minibroker.client.admin_zk import create_topic, read_topic, wait_for_leaders
from minibroker.history import HistoryRecorder, check, load
from minibroker.runtime.waiting import wait_until
from minibroker.swarm.lab import docker
from tests.swarm.conftest import STACK, Swarm

TOPIC = "orders"
MACHINE_TOPIC = "writes"  # the machine-death test's own: its history is all that is in it


def test_each_broker_runs_on_its_own_machine_and_clients_reach_them_from_both_sides(
    swarm: Swarm, tmp_path: Path
) -> None:
    placed = {
        s: swarm.stack.task(s).node for s in ("zookeeper", "broker-1", "broker-2", "broker-3")
    }
    assert placed == {"zookeeper": "node-1", "broker-1": "node-1", "broker-2": "node-2",
                      "broker-3": "node-3"}  # fmt: skip
    zk = swarm.zk()
    try:
        create_topic(zk, TOPIC, 3, 3, {"min.insync.replicas": "2"}, random.Random(1))
        wait_for_leaders(zk, TOPIC, 30_000)
        info = read_topic(zk, TOPIC)
        assert info is not None and all(sorted(r) == [1, 2, 3] for r in info.assignment.values())
    finally:
        zk.stop()

    # From outside the swarm: each node's address, host-mode ports.
    with HistoryRecorder(tmp_path / "outside.jsonl") as recorder:
        producer = recorder.producer({"bootstrap.servers": swarm.bootstrap_servers, "acks": "all"})
        for i in range(30):
            producer.produce(TOPIC, b"outside-%d" % i, partition=i % 3)
        assert producer.flush(60) == 0

    # From inside: a one-off container on the overlay (attachable), Kafka's console tools by
    # their names against the brokers' service names.
    node = swarm.lab.nodes[2]
    network = f"{STACK}_minibroker"
    inside = "broker-1:29092,broker-2:29092,broker-3:29092"
    docker(node, "run", "--rm", "--network", network, "--entrypoint", "sh", "minibroker:dev",
           "-c", f"seq 1 20 | sed 's/^/inside-/' | kafka-console-producer --bootstrap-server "
           f"{inside} --topic {TOPIC} --producer-property acks=all", timeout=180)  # fmt: skip
    read = docker(node, "run", "--rm", "--network", network, "minibroker:dev",
                  "kafka-console-consumer", "--bootstrap-server", inside, "--topic", TOPIC,
                  "--from-beginning", "--timeout-ms", "10000", timeout=180)  # fmt: skip
    # The console producer is Kafka's: no idempotence, so a retried send may be written twice.
    want = {f"outside-{i}" for i in range(30)} | {f"inside-{i}" for i in range(1, 21)}
    assert set(read.split()) == want, (sorted(want - set(read.split())), read)


def test_a_machine_dies_and_comes_back(swarm: Swarm, tmp_path: Path) -> None:
    zk = swarm.zk()
    try:
        create_topic(zk, MACHINE_TOPIC, 3, 3, {"min.insync.replicas": "2"}, random.Random(2))
        wait_for_leaders(zk, MACHINE_TOPIC, 30_000)
    finally:
        zk.stop()
    stop = threading.Event()
    with HistoryRecorder(tmp_path / "writes.jsonl") as recorder:
        producer = recorder.producer(
            {"bootstrap.servers": swarm.bootstrap_servers, "acks": "all",
             "enable.idempotence": True, "message.timeout.ms": 60_000}
        )  # fmt: skip

        def write() -> None:
            i = 0
            while not stop.is_set():
                producer.produce(MACHINE_TOPIC, b"w-%d" % i, partition=i % 3)
                producer.poll(0)
                i += 1
                time.sleep(0.01)
            producer.flush(90)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            time.sleep(2)
            zk = swarm.zk()
            try:
                swarm.lab.kill_node("node-2")  # its engine and every container on it
                killed_at = time.monotonic()

                def moved() -> bool:
                    info = read_topic(zk, MACHINE_TOPIC)
                    states = info.states.values() if info else []
                    return bool(states) and all(s.leader != 2 and 2 not in s.isr for s in states)

                wait_until(moved, timeout_s=60, what="leaders and ISRs without broker 2")
                moved_after = time.monotonic() - killed_at
                time.sleep(2)  # writes go on to brokers 1 and 3 (min.insync.replicas 2)
                swarm.lab.start_node("node-2")
                # restart_policy none: its task stays down until started again, on node-2 (its
                # label), with its volume.
                docker(swarm.lab.nodes[0], "service", "update", "--force", "--detach",
                       f"{STACK}_broker-2")  # fmt: skip

                def back() -> bool:
                    info = read_topic(zk, MACHINE_TOPIC)
                    states = info.states.values() if info else []
                    return bool(states) and all(sorted(s.isr) == [1, 2, 3] for s in states)

                wait_until(back, timeout_s=180, what="broker 2 back in every ISR")
            finally:
                zk.stop()
        finally:
            stop.set()
            writer.join(120)

    task = swarm.stack.task("broker-2")
    assert task.node == "node-2" and task.state == "running"
    log = swarm.stack.container("broker-2").logs().decode(errors="replace")
    opened = [json.loads(line) for line in log.splitlines() if '"log_opened"' in line]
    assert any(e["tp"].startswith(MACHINE_TOPIC) and e["log_end_offset"] > 0 for e in opened), (
        "broker-2 came back without its data"
    )

    with HistoryRecorder(tmp_path / "reads.jsonl") as recorder:
        consumer = recorder.consumer(
            {"bootstrap.servers": swarm.bootstrap_servers, "group.id": "audit",
             "auto.offset.reset": "earliest", "enable.partition.eof": True}
        )  # fmt: skip
        consumer.subscribe([MACHINE_TOPIC])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while at_end != {0, 1, 2} and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                (at_end.add if m.error() else at_end.discard)(m.partition())
        consumer.close()
    result = check(load(sorted(tmp_path.glob("*.jsonl"))))
    assert result.ok, result.text()
    sent = [s for s in load(sorted(tmp_path.glob("writes.jsonl"))).sends if s.outcome == "ok"]
    assert len(sent) > 100
    print(f"leaders moved {moved_after:.1f} s after the machine died; {len(sent)} acknowledged")
