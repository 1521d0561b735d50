"""`python -m bench swarm` (issue 40 §3): the cluster on one Docker engine (compose) next to the
same cluster on a swarm of three engines (the lab: minibroker/swarm/lab.py), each broker on its
own machine so that replication crosses the overlay network (VXLAN between the engines):

- acks=all through confluent-kafka from this machine, 100-byte records, at peak and at half
  of the compose cluster's peak, with the ratio swarm/compose printed;
- failover: from a fault on partition 0's leader to ZooKeeper naming a new leader, after a
  container kill (compose, and a task's container on the swarm) and after a machine's death (the
  swarm: the leader's machine killed, its engine and everything on it).

Both clusters run the demo profile (ZooKeeper session 6 s), one after the other on the same
machine. The lab's machines share this machine's two cores: the overlay's cost is measured,
not a network's."""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from bench.common import Result, md_table
from bench.kafka_clients import confluent_built

TOPIC = "bench"
RECORD_BYTES = 100


@dataclass
class Target:
    """What confluent_built needs of a cluster."""

    topic: str
    leaders: dict[int, int]


def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _leaders(zk_connect: str) -> dict[int, tuple[int, tuple[int, ...]]]:
    from minibroker.client.admin_zk import read_topic
    from minibroker.runtime.zk_store import ZkStore

    zk = ZkStore(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        info = read_topic(zk, TOPIC)
        states = info.states if info else {}
        return {p: (s.leader, tuple(s.isr)) for p, s in states.items()}
    finally:
        zk.stop()


def _create_topic(zk_connect: str) -> dict[int, int]:
    import random

    from minibroker.client.admin_zk import create_topic, wait_for_leaders
    from minibroker.runtime.zk_store import ZkStore

    zk = ZkStore(zk_connect, session_timeout_ms=10_000)
    zk.start()
    try:
        create_topic(zk, TOPIC, 3, 3, {"min.insync.replicas": "2"}, random.Random(7))
        wait_for_leaders(zk, TOPIC, 30_000)
    finally:
        zk.stop()
    return {p: leader for p, (leader, _) in _leaders(zk_connect).items()}


def _produce(bootstrap: str, leaders: dict[int, int], seconds: float, rate: float | None) -> Result:
    target = cast(Any, Target(TOPIC, leaders))  # the two attributes confluent_built reads
    return confluent_built(target, -1, RECORD_BYTES, seconds, rate, bootstrap=bootstrap)


def _failover(zk_connect: str, fault: Callable[[int], Callable[[], None]]) -> float:
    """Seconds from `fault(leader)()` on partition 0's leader to a new leader in ZooKeeper; then
    what fault returned brings it back, and all three are in sync again."""
    leader, _ = _leaders(zk_connect)[0]
    undo = fault(leader)
    started = time.monotonic()
    _wait(lambda: _leaders(zk_connect)[0][0] not in (leader, -1), 60, "a new leader")
    took = time.monotonic() - started
    undo()
    _wait(
        lambda: all(sorted(isr) == [1, 2, 3] for _, isr in _leaders(zk_connect).values()),
        180, "every replica back in sync",
    )  # fmt: skip
    return took


@dataclass
class Figures:
    peak: Result
    half: Result
    failovers: dict[str, list[float]]


def measure_compose(seconds: float, runs: int, half_rate: float | None) -> Figures:
    from minibroker.testing import Cluster

    cluster = Cluster(compose=True, project="mbbench-compose").up()
    try:
        zk = cluster.zookeeper_connect
        leaders = _create_topic(zk)
        peak = _produce(cluster.bootstrap_servers, leaders, seconds, None)
        half = _produce(
            cluster.bootstrap_servers, leaders, seconds, half_rate or peak.records_per_s / 2
        )

        def kill(broker: int) -> Callable[[], None]:
            cluster.kill(f"broker-{broker}")

            def back() -> None:
                cluster.start(f"broker-{broker}")

            return back

        return Figures(peak, half, {"container kill": [_failover(zk, kill) for _ in range(runs)]})
    finally:
        cluster.down()


def measure_swarm(seconds: float, runs: int, half_rate: float) -> Figures:
    from minibroker.swarm import cluster as swarm_cluster
    from minibroker.swarm.backend import SwarmBackend
    from minibroker.swarm.lab import SwarmLab

    lab = SwarmLab("mbbench").up()
    try:
        v = lab.variables()
        zk = v["MINIBROKER_ZK"]
        swarm_cluster.up("minibroker", swarm_cluster.find_stack_file(), lab.access(), v, 300)
        backend = SwarmBackend("minibroker", zk, lab.access())
        bootstrap = ",".join(f"{n.address}:{9092 + i}" for i, n in enumerate(lab.nodes[:3]))
        leaders = _create_topic(zk)
        peak = _produce(bootstrap, leaders, seconds, None)
        half = _produce(bootstrap, leaders, seconds, half_rate)

        def kill_task(broker: int) -> Callable[[], None]:
            backend.kill(f"broker-{broker}")
            return lambda: backend.start(f"broker-{broker}")

        def kill_machine(broker: int) -> Callable[[], None]:
            assert broker != 1, "node-1 holds ZooKeeper too"
            lab.kill_node(f"node-{broker}")

            def back() -> None:
                lab.start_node(f"node-{broker}")
                # Every task that was on it: the broker and the controller (leave a controller
                # down and the next machine's death leaves none to elect anyone).
                for name in backend.names():
                    if name != "zookeeper" and backend.state(name) == "dead":
                        backend.start(name)

            return back

        tasks = [_failover(zk, kill_task) for _ in range(runs)]
        machines = []
        for _ in range(runs):
            if _leaders(zk)[0][0] == 1:  # node-1 holds ZooKeeper too: move the leader off it
                backend.restart("broker-1")
                _wait(lambda: _leaders(zk)[0][0] != 1, 60, "partition 0 off broker 1")
                _wait(
                    lambda: all(sorted(i) == [1, 2, 3] for _, i in _leaders(zk).values()),
                    180, "every replica in sync",
                )  # fmt: skip
            machines.append(_failover(zk, kill_machine))
        return Figures(peak, half, {"task's container kill": tasks, "machine death": machines})
    finally:
        lab.down()


def _row(name: str, r: Result) -> list[str]:
    return [name, f"{r.records_per_s:,.0f}", f"{r.p50_ms or 0:.1f}", f"{r.p99_ms or 0:.1f}"]


def report(compose: Figures, swarm: Figures) -> str:
    out = ["acks=all, 100 B records, confluent-kafka from this machine:", ""]
    rows = [
        _row("one engine (compose), peak", compose.peak),
        _row("swarm of three engines, peak", swarm.peak),
        _row("one engine (compose), half", compose.half),
        _row("swarm of three engines, same rate", swarm.half),
    ]
    out.append(md_table(["cluster, load", "records/s", "p50 ms", "p99 ms"], rows))
    ratio = swarm.peak.records_per_s / compose.peak.records_per_s
    p50 = (swarm.half.p50_ms or 0) / (compose.half.p50_ms or 1)
    out += ["", f"swarm/compose: peak records/s {ratio:.2f}, p50 at the same rate {p50:.2f}", ""]
    fails = [
        (f"{where}: {kind}", f"{statistics.median(xs):.1f} s", ", ".join(f"{x:.1f}" for x in xs))
        for where, f in (("compose", compose), ("swarm", swarm))
        for kind, xs in f.failovers.items()
    ]
    out.append(
        md_table(["fault on partition 0's leader", "to a new leader, median", "runs"], fails)
    )
    return "\n".join(out)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10, help="producer run length")
    parser.add_argument("--runs", type=int, default=3, help="failovers of each kind")


def main(args: argparse.Namespace) -> None:
    compose = measure_compose(args.seconds, args.runs, None)
    swarm = measure_swarm(args.seconds, args.runs, compose.half.records_per_s)
    print(report(compose, swarm))
