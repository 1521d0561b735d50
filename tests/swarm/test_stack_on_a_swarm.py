"""deploy/stack.yml on a swarm of three engines (issue 40 §2), deployed by deploy/SWARM.md's
blocks: ZooKeeper and each broker on the node labelled for it, each broker's machine in its
registration (broker.rack), Kafka clients outside the swarm through each node's address (kcat
and confluent-kafka) and inside it through the overlay's service names (kcat, confluent-kafka,
Kafka's console tools), a whole machine dying (SWARM.md's blocks): its broker's ZooKeeper
session expires, leaders move to the other machines, no acknowledged record is lost, and when
the machine comes back its broker rejoins with its data and returns to the ISR; the load
generator from this machine with faults, and the stack's own Spark with a worker per machine."""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
import urllib.request
from pathlib import Path

from minibroker import topology as t
from minibroker.client.admin_zk import create_topic, live_brokers, read_topic, wait_for_leaders
from minibroker.history import HistoryRecorder
from minibroker.runtime.waiting import wait_until
from minibroker.swarm.lab import docker
from tests.swarm.conftest import STACK, Swarm
from tests.swarm.writes import (
    all_in_sync,
    read_back_and_check,
    wait_partitions,
    without,
    writes_through,
)

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
        racks = {b: reg.rack for b, reg in live_brokers(zk).items()}
        assert racks == {1: "node-1", 2: "node-2", 3: "node-3"}  # broker.rack: the machine
    finally:
        zk.stop()

    # The stack's dashboard (on the manager, node-1) shows each broker's machine.
    def dashboard_racks() -> dict[str, str]:
        url = f"http://{swarm.lab.nodes[0].address}:{t.DASHBOARD_PORT}/api/state"
        with urllib.request.urlopen(url, timeout=10) as answer:
            return {b["name"]: b["rack"] for b in json.load(answer)["brokers"]}

    machines = {"broker-1": "node-1", "broker-2": "node-2", "broker-3": "node-3"}
    wait_until(lambda: dashboard_racks() == machines, timeout_s=30, what="the dashboard's racks")

    # kcat from outside: the metadata names each broker at its machine's address.
    listing = subprocess.run(
        ["kcat", "-b", swarm.bootstrap_servers.split(",")[1], "-L", "-t", TOPIC],
        capture_output=True, text=True, timeout=60, check=True, stdin=subprocess.DEVNULL,
    ).stdout  # fmt: skip
    for b, node in enumerate(swarm.lab.nodes, start=1):
        assert f"broker {b} at {node.address}:" in listing, listing
    subprocess.run(
        ["kcat", "-b", swarm.bootstrap_servers, "-P", "-t", TOPIC, "-p", "0", "-X", "acks=all"],
        input="kcat-1\nkcat-2\n", capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip

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
    # kcat inside too (the netfault image has it): metadata names the brokers by their
    # service names, and a write with acks=all.
    kcat = ["run", "--rm", "--network", network, "--entrypoint", "sh", "minibroker-netfault:dev",
            "-c"]  # fmt: skip
    listing = docker(node, *kcat, f"kcat -b {inside} -L -t {TOPIC}", timeout=120)
    for b in (1, 2, 3):
        assert f"broker {b} at broker-{b}:29092" in listing, listing
    docker(node, *kcat, f"echo kcat-inside-1 | kcat -b {inside} -P -t {TOPIC} -p 1 -X acks=all",
           timeout=120)  # fmt: skip
    read = docker(node, "run", "--rm", "--network", network, "minibroker:dev",
                  "kafka-console-consumer", "--bootstrap-server", inside, "--topic", TOPIC,
                  "--from-beginning", "--timeout-ms", "10000", timeout=180)  # fmt: skip
    # The console producer is Kafka's: no idempotence, so a retried send may be written twice.
    want = {f"outside-{i}" for i in range(30)} | {f"inside-{i}" for i in range(1, 21)}
    want |= {"kcat-1", "kcat-2", "kcat-inside-1"}
    assert set(read.split()) == want, (sorted(want - set(read.split())), read)


def test_a_machine_dies_and_comes_back(swarm: Swarm, tmp_path: Path) -> None:
    with writes_through(swarm, MACHINE_TOPIC, tmp_path):
        started = time.monotonic()
        swarm.block("swarm-machine-dies")  # node-2's engine and every container on it
        wait_partitions(swarm, MACHINE_TOPIC, without(2), "leaders and ISRs without broker 2", 60)
        moved_after = time.monotonic() - started
        time.sleep(2)  # writes go on to brokers 1 and 3 (min.insync.replicas 2)
        swarm.block("swarm-machine-back")  # the machine, then its broker's task (a new one)
        wait_partitions(swarm, MACHINE_TOPIC, all_in_sync, "broker 2 back in every ISR", 180)

    task = swarm.stack.task("broker-2")
    assert task.node == "node-2" and task.state == "running"
    wait_until(
        lambda: swarm.backend.state("controller-1") == "running",
        timeout_s=60, what="controller-1 (node-2's) running again",
    )  # fmt: skip
    log = swarm.stack.container("broker-2").logs().decode(errors="replace")
    opened = [json.loads(line) for line in log.splitlines() if '"log_opened"' in line]
    assert any(e["tp"].startswith(MACHINE_TOPIC) and e["log_end_offset"] > 0 for e in opened), (
        "broker-2 came back without its data"
    )
    acked = read_back_and_check(swarm, MACHINE_TOPIC, tmp_path)
    print(f"leaders moved {moved_after:.1f} s after the machine died; {acked} acknowledged")


def test_the_load_generator_drives_the_swarm_through_a_killed_broker(swarm: Swarm) -> None:
    """SWARM.md's swarm-loadgen block: Spark on this machine, its faults on the stack's tasks,
    every acknowledged record read back."""
    out = swarm.block("swarm-loadgen", timeout=600).stdout
    print(out[-2000:])
    line = next(x for x in out.splitlines() if x.startswith("report: "))
    report_file = Path(line.split()[1])
    if not report_file.is_absolute():
        report_file = Path(__file__).resolve().parents[2] / "deploy" / report_file
    got = json.loads(report_file.read_text())
    assert got["verification"]["acked"] > 0 and got["verification"]["missing"] == 0
    faults = [f for f in got["faults"] if not f["error"]]
    assert len(faults) == 2, got["faults"]  # the kill and the start, both carried out
    wait_partitions(swarm, "loadgen", all_in_sync, "broker 3 back in every ISR", 120)
    shutil.rmtree(report_file.parent)


def test_the_stacks_load_generator_runs_on_spark_workers_on_every_machine(swarm: Swarm) -> None:
    """SWARM.md's swarm-spark block: Spark standalone scaled up in the stack, a worker on each
    machine, the load generator service's run with its tasks' ledgers sent to the driver (the
    machines share no folder), every acknowledged record read back; then swarm-spark-off."""
    swarm.block("swarm-images-spark", timeout=600)
    out = swarm.block("swarm-spark", timeout=900).stdout
    print(out[-2500:])
    assert "verification: OK: 0 of 100,000 acknowledged records missing" in out
    launched = {}
    for node in (n.name for n in swarm.lab.nodes):
        workers = swarm.stack.engine(node).containers.list(
            filters={"label": f"com.docker.swarm.service.name={STACK}_spark-worker"}
        )
        assert len(workers) == 1, f"{node} runs {len(workers)} Spark workers"
        log = workers[0].logs().decode(errors="replace")
        launched[node] = log.count("Asked to launch executor")
    assert all(launched.values()), f"executors launched per machine: {launched}"
    swarm.block("swarm-spark-off", timeout=120)

    # confluent-kafka inside the overlay (the load generator's image has it), by service names:
    # idempotent acks=all writes to the run's topic, read back at the offsets acknowledged.
    inside = "broker-1:29092,broker-2:29092,broker-3:29092"
    code = f"""
from confluent_kafka import Consumer, Producer, TopicPartition
p = Producer({{"bootstrap.servers": "{inside}", "acks": "all", "enable.idempotence": True}})
acked = []
for i in range(5):
    p.produce("loadgen", b"confluent-inside-%d" % i, partition=0,
              on_delivery=lambda err, m: acked.append((err, m.offset())))
assert p.flush(60) == 0 and len(acked) == 5 and all(e is None for e, _ in acked), acked
c = Consumer({{"bootstrap.servers": "{inside}", "group.id": "inside"}})
c.assign([TopicPartition("loadgen", 0, min(o for _, o in acked))])
values = []
while len(values) < 5:
    m = c.poll(30)
    assert m is not None, values
    if not m.error():
        values.append(m.value().decode())
print(" ".join(values))
"""
    read = docker(swarm.lab.nodes[1], "run", "--rm", "--network", f"{STACK}_minibroker",
                  "--entrypoint", "python", "minibroker-loadgen:dev", "-c", code,
                  timeout=180)  # fmt: skip
    assert read.split() == [f"confluent-inside-{i}" for i in range(5)], read
