"""The controller on a real cluster (issue 5's must-shows): 3 brokers, 2 controllers, the demo
timing profile; topics created the way an admin tool does, everything else by the controller."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest

from minibroker.client import Producer
from minibroker.client.read_back import read_partition
from minibroker.core.errors import ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.integration.conftest import Cluster, running_cluster
from tests.integration.controller_helper import FakeController
from tests.integration.rpc import batch, metadata, produce

pytestmark = pytest.mark.integration

TOPIC = "payments"
TP = TopicPartition(TOPIC, 0)
SESSION_MS = 6000  # the demo profile's zookeeper.session.timeout.ms


@contextlib.contextmanager
def cluster_with_topic(tmp_path: Path, *overrides: str) -> Iterator[tuple[Cluster, FakeController]]:
    sets = [a for o in overrides for a in ("--set", o)]
    with running_cluster(tmp_path / "cluster", *sets) as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        zk.start()
        try:
            admin = FakeController(zk)
            admin.create_topic(TOPIC, {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
            yield Cluster(tmp_path / "cluster", state, zk), admin
        finally:
            zk.stop()


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[tuple[Cluster, FakeController]]:
    with cluster_with_topic(tmp_path) as cluster:
        yield cluster


def brokers(c: Cluster) -> dict[int, str]:
    return {p.id: p.address for p in c.reload().by_role("broker") if p.id is not None}


@dataclass
class Load:
    """An acks=all producer writing partition 0 until stopped; what it got acknowledged."""

    bootstrap: list[str]
    acked: list[tuple[int, bytes, float]] = field(default_factory=list)
    failed: int = 0
    stop: asyncio.Event = field(default_factory=asyncio.Event)

    async def run(self) -> None:
        async with Producer(
            self.bootstrap, acks=-1, linger_ms=1, request_timeout_ms=5000, retry_backoff_ms=50
        ) as producer:
            i = 0
            while not self.stop.is_set():
                value = b"v%d" % i
                try:
                    md = await producer.send_and_wait(TOPIC, value, partition=0)
                    self.acked.append((md.offset, value, time.monotonic()))
                except Exception:
                    self.failed += 1
                i += 1

    async def until(self, count: int, timeout_s: float = 30) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.acked) < count:
            assert time.monotonic() < deadline, f"only {len(self.acked)} acks"
            await asyncio.sleep(0.05)

    def max_gap_s(self, after: float) -> float:
        times = [t for _, _, t in self.acked if t >= after - 5]
        return max((b - a for a, b in zip(times, times[1:], strict=False)), default=0.0)


def metadata_agrees(c: Cluster, alive: list[int], leader: int, epoch: int) -> bool:
    addrs = brokers(c)
    return all(metadata(addrs[b], TOPIC).get(0, (-9, -9, ()))[:2] == (leader, epoch) for b in alive)


def test_killing_the_leader_elects_the_first_live_isr_replica_and_loses_nothing(
    demo: tuple[Cluster, FakeController],
) -> None:
    c, admin = demo

    async def body() -> None:
        load = Load(list(brokers(c).values()))
        task = asyncio.ensure_future(load.run())
        await load.until(50)
        before = admin.state(TP)
        killed_at = time.monotonic()
        await asyncio.to_thread(c.cli, "cluster", "kill", f"broker-{before.leader}")

        def new_leader() -> LeaderAndIsr | None:
            s = admin.state(TP)
            return s if s.leader not in (before.leader, -1) else None

        after = await asyncio.to_thread(wait_until, new_leader, timeout_s=30, what="a new leader")
        took = time.monotonic() - killed_at
        print(f"new leader {after.leader} after {took:.2f} s (session timeout {SESSION_MS} ms)")
        live_isr = [b for b in (1, 2, 3) if b in before.isr and b != before.leader]
        assert after.leader == live_isr[0]  # first live ISR replica in assignment order
        assert after.leader_epoch == before.leader_epoch + 1
        assert before.leader not in after.isr
        alive = [b for b in (1, 2, 3) if b != before.leader]
        await asyncio.to_thread(
            wait_until,
            lambda: metadata_agrees(c, alive, after.leader, after.leader_epoch),
            timeout_s=15,
            what="every live broker's metadata to agree",
        )
        count = len(load.acked)
        await load.until(count + 50)  # the producer continues
        load.stop.set()
        await task
        got = await read_partition([brokers(c)[b] for b in alive], TP)
        lost = [(o, v) for o, v, _ in load.acked if got.get(o) != v]
        assert lost == [], f"{len(lost)} acknowledged records lost"

    asyncio.run(body())


def test_isr_change_reaches_every_brokers_metadata_through_the_controller(
    tmp_path: Path,
) -> None:
    # Sessions outlive the lag, so the leader (not the controller) shrinks the ISR.
    with cluster_with_topic(tmp_path, "zookeeper.session.timeout.ms=15000") as (c, admin):
        addrs = brokers(c)
        leader = admin.state(TP).leader
        follower = next(b for b in (1, 2, 3) if b != leader)
        c.cli("cluster", "pause", f"broker-{follower}")
        try:
            shrunk = wait_until(
                lambda: (
                    produce(addrs[leader], TP, batch(b"x"), acks=1)
                    and follower not in admin.state(TP).isr
                ),
                timeout_s=20,
                what="the leader to shrink the ISR",
            )
            assert shrunk
            others = [b for b in (1, 2, 3) if b != follower]
            wait_until(
                lambda: all(follower not in metadata(addrs[b], TOPIC)[0][2] for b in others),
                timeout_s=20,
                what="every live broker's metadata to show the new ISR",
            )
            updated_ms = time.time() * 1000
            created = [
                e
                for e in c.log_events(f"broker-{leader}")
                if e["event"] == "isr_change_notification_created"
            ]
            assert created, "the leader wrote no isr_change node"
            print(
                f"isr_change node to the last broker's UpdateMetadata: "
                f"{updated_ms - created[0]['ts']:.0f} ms (upper bound: polled)"
            )
            active = next(
                p.name for p in c.reload().by_role("controller") if p.id == c.zk.read_controller()
            )
            processed = [e for e in c.log_events(active) if e["event"] == "isr_change_processed"]
            assert processed and any(
                created[0]["path"].endswith(n) for e in processed for n in e["nodes"]
            )
            wait_until(
                lambda: c.zk.children("/isr_change_notification") == [],
                timeout_s=10,
                what="the controller to delete the notification",
            )
        finally:
            c.cli("cluster", "resume", f"broker-{follower}")


def send_with_epoch(address: str, kind: str, epoch: int) -> int:
    with grpc.insecure_channel(address) as channel:
        stub = control_pb2_grpc.ControlStub(channel)
        if kind == "LeaderAndIsr":
            request: Any = control_pb2.LeaderAndIsrRequest(
                controller_id=101, controller_epoch=epoch
            )
        else:
            request = control_pb2.UpdateMetadataRequest(controller_id=101, controller_epoch=epoch)
        return int(getattr(stub, kind)(request, timeout=10).error_code)


def test_a_standby_takes_over_processes_leftovers_and_old_epochs_are_rejected(
    tmp_path: Path,
) -> None:
    # Sessions of 12 s, lag 3 s: a follower stalled right after the controller died leaves the
    # ISR (3-4.5 s) well before the dead controller's session expires and the standby takes
    # over, so the notification is left for the new controller. (With 6 s sessions the margin
    # was under a second, and a busy machine let the standby win the race now and then.)
    with cluster_with_topic(
        tmp_path,
        "zookeeper.session.timeout.ms=12000",
        "minibroker.isr.change.propagation.interval.ms=250",
        "minibroker.isr.change.propagation.blackout.ms=500",
    ) as (c, admin):
        addrs = brokers(c)
        old_epoch = c.zk.read_controller_epoch()
        assert old_epoch is not None
        victim = next(p for p in c.state.by_role("controller") if p.id == c.zk.read_controller())
        leader = admin.state(TP).leader
        follower = next(b for b in (1, 2, 3) if b != leader)
        c.cli("cluster", "kill", victim.name)
        c.cli("cluster", "pause", f"broker-{follower}")
        try:
            wait_until(
                lambda: (
                    produce(addrs[leader], TP, batch(b"x"), acks=1)
                    and follower not in admin.state(TP).isr
                ),
                timeout_s=20,
                what="the leader to shrink the ISR",
            )
            new_id = wait_until(
                lambda: (cid := c.zk.read_controller()) not in (None, victim.id) and cid,
                timeout_s=30,
                what="the standby to take over",
            )
            epoch = c.zk.read_controller_epoch()
            assert epoch is not None and epoch[0] == old_epoch[0] + 1
            standby = next(p for p in c.state.by_role("controller") if p.id == new_id)
            wait_until(
                lambda: any(
                    e["event"] == "isr_change_processed" and e["leftover"]
                    for e in c.log_events(standby.name)
                ),
                timeout_s=20,
                what="the new controller to process the leftover notification",
            )
            # Brokers adopted the new epoch: requests with the old one are refused.
            for kind in ("LeaderAndIsr", "UpdateMetadata"):

                def refused(kind: str = kind) -> bool:
                    code = send_with_epoch(addrs[leader], kind, old_epoch[0])
                    return code == ErrorCode.STALE_CONTROLLER_EPOCH

                wait_until(refused, timeout_s=20, what=f"{kind} with the old epoch to be refused")
        finally:
            c.cli("cluster", "resume", f"broker-{follower}")


def test_controlled_shutdown_of_the_leader_moves_it_with_a_short_write_gap(
    demo: tuple[Cluster, FakeController],
) -> None:
    c, admin = demo

    async def body() -> None:
        load = Load(list(brokers(c).values()))
        task = asyncio.ensure_future(load.run())
        await load.until(50)
        leader = admin.state(TP).leader
        stop_at = time.monotonic()
        await asyncio.to_thread(c.cli, "cluster", "stop", f"broker-{leader}")
        await load.until(len(load.acked) + 50)
        load.stop.set()
        await task
        gap = load.max_gap_s(stop_at)
        print(f"largest gap between acks=all acknowledgements around the stop: {gap * 1000:.0f} ms")
        state = admin.state(TP)
        assert state.leader != leader and leader not in state.isr
        events = [e["event"] for e in c.log_events(f"broker-{leader}")]
        assert "controlled_shutdown_succeeded" in events
        # Leadership moved before the broker left: no acknowledged send failed. (The gap is
        # printed above, not asserted: timings belong to benchmarks.)
        assert load.failed == 0

    asyncio.run(body())


def test_a_restarted_broker_truncates_by_epoch_catches_up_and_rejoins(
    demo: tuple[Cluster, FakeController],
) -> None:
    c, admin = demo

    async def body() -> None:
        load = Load(list(brokers(c).values()))
        task = asyncio.ensure_future(load.run())
        await load.until(30)
        follower = next(b for b in (1, 2, 3) if b != admin.state(TP).leader)
        await asyncio.to_thread(c.cli, "cluster", "kill", f"broker-{follower}")
        await load.until(len(load.acked) + 50)
        await asyncio.to_thread(c.cli, "cluster", "restart", f"broker-{follower}")
        await load.until(len(load.acked) + 50)
        load.stop.set()
        await task
        await asyncio.to_thread(
            wait_until,
            lambda: follower in admin.state(TP).isr,
            timeout_s=30,
            what="the restarted broker to re-enter the ISR",
        )
        events = [e["event"] for e in c.log_events(f"broker-{follower}")]
        assert "follower_truncation_checked" in events or "follower_truncated" in events

    asyncio.run(body())

    def segments() -> list[bytes]:
        out = []
        for b in (1, 2, 3):
            d = Path(c.state.process(f"broker-{b}").data_dir) / "data" / f"{TOPIC}-0"
            out.append((d / "00000000000000000000.log").read_bytes())
        return out

    wait_until(lambda: len(set(segments())) == 1, timeout_s=30, what="identical logs")


def scrape(port: int, name: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def test_preferred_election_on_request_and_by_the_rebalance_task(tmp_path: Path) -> None:
    with cluster_with_topic(
        tmp_path,
        "leader.imbalance.check.interval.seconds=1",
        "zookeeper.session.timeout.ms=3000",
    ) as (c, admin):
        assert admin.state(TP).leader == 1  # the preferred replica leads at creation
        moved = admin.elect(TP, 2, [1, 2, 3])  # an out-of-band move away from it
        assert moved.leader == 2
        # The automatic rebalance (first check 5 s after failover, then every second) moves
        # leadership back: broker 1 prefers 1 partition and leads none, > 10 %.

        def preferred_leads() -> LeaderAndIsr | None:
            s = admin.state(TP)
            return s if s.leader == 1 else None

        back = wait_until(
            preferred_leads, timeout_s=30, what="the rebalance task to restore the preferred leader"
        )
        assert back.leader_epoch == moved.leader_epoch + 1
        assert back.isr == moved.isr  # preferred election keeps the ISR
        active = next(p for p in c.reload().by_role("controller") if p.id == c.zk.read_controller())
        standby = next(p for p in c.state.by_role("controller") if p.id != active.id)
        assert (
            scrape(active.metrics_port, "kafka_controller_kafkacontroller_activecontrollercount")
            == 1
        )
        assert (
            scrape(standby.metrics_port, "kafka_controller_kafkacontroller_activecontrollercount")
            == 0
        )
        # On request: `topics elect-preferred` writes the admin znode; the controller acts and
        # deletes it. On a topic where broker 1 prefers 20 partitions, one moved away is 5 %,
        # under leader.imbalance.per.broker.percentage (10): the rebalance task leaves it
        # alone, so only the requested election can move it back (issue 26: it raced before).
        quiet = "quiet"
        admin.create_topic(quiet, {p: [1, 2, 3] for p in range(20)})
        moved_tp = TopicPartition(quiet, 7)
        wait_until(lambda: admin.state(moved_tp).leader == 1, timeout_s=30, what="quiet's leaders")
        admin.elect(moved_tp, 3, [1, 2, 3])
        c.cli("topics", "elect-preferred", "--topic", quiet, "--partition", "7", "--wait")
        assert admin.state(moved_tp).leader == 1
        events = [e for e in c.log_events(active.name) if e["event"] == "leader_elected"]
        by_cause = {(e.get("tp"), e.get("cause")) for e in events}
        assert (str(TP), "auto_rebalance") in by_cause
        assert (str(moved_tp), "admin") in by_cause
        assert (str(moved_tp), "auto_rebalance") not in by_cause


def test_unclean_election_only_where_the_topic_enables_it(tmp_path: Path) -> None:
    with cluster_with_topic(tmp_path) as (c, admin):  # demo profile: session 6 s, lag 3 s
        clean, dirty = TopicPartition("clean", 0), TopicPartition("dirty", 0)
        admin.create_topic("clean", {0: [1, 2]})
        admin.create_topic("dirty", {0: [1, 2]}, {"unclean.leader.election.enable": "true"})
        addrs = brokers(c)
        c.cli("cluster", "pause", "broker-2")
        try:
            # Broker 2 falls behind; the leader (1) removes it from both ISRs.
            wait_until(
                lambda: all(
                    produce(addrs[1], tp, batch(b"x"), acks=1) and admin.state(tp).isr == (1,)
                    for tp in (clean, dirty)
                ),
                timeout_s=20,
                what="both ISRs to shrink to the leader",
            )
            c.cli("cluster", "kill", "broker-1")
        finally:
            c.cli("cluster", "resume", "broker-2")  # alive again, but outside the ISRs
        wait_until(
            lambda: admin.state(dirty).leader == 2,
            timeout_s=30,
            what="the unclean election of broker 2",
        )
        assert admin.state(dirty).isr == (2,)
        # No election for "clean"; the dead leader's ISR removal (same event, right after the
        # elections) leaves leader -1 with the last ISR member still listed.
        wait_until(lambda: admin.state(clean).leader == -1, timeout_s=10, what="leader -1")
        assert admin.state(clean).isr == (1,)
        active = next(p for p in c.reload().by_role("controller") if p.id == c.zk.read_controller())
        unclean = scrape(
            active.metrics_port,
            "kafka_controller_controllerstats_uncleanleaderelectionspersec_total",
        )
        assert unclean == 1
