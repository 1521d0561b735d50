"""Replication between real broker processes (issue 4's must-shows): RF 3, min.insync.replicas 2,
the ISR written to the real ZooKeeper. A test-only stand-in plays the controller."""

from __future__ import annotations

import contextlib
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from broker.log.checkpoints import read_offsets_checkpoint
from minibroker import localcluster
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.integration.conftest import Cluster, running_cluster
from tests.integration.controller_helper import FakeController
from tests.integration.rpc import Fetched, batch, fetch, list_offset, produce

pytestmark = pytest.mark.integration

TP = TopicPartition("events", 0)
LAG_MS = 3000  # the demo profile's replica.lag.time.max.ms
OVERRIDES = [
    "minibroker.isr.change.propagation.interval.ms=500",
    "minibroker.isr.change.propagation.blackout.ms=1000",
]


@contextlib.contextmanager
def replicated_cluster(
    tmp_path: Path, session_timeout_ms: int
) -> Iterator[tuple[Cluster, FakeController]]:
    d = tmp_path / "cluster"
    overrides = [f"zookeeper.session.timeout.ms={session_timeout_ms}", *OVERRIDES]
    sets = [a for o in overrides for a in ("--set", o)]
    with running_cluster(d, *sets) as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        zk.start()
        try:
            ctl = FakeController(zk)
            ctl.create_topic(TP.topic, {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
            yield Cluster(d, state, zk), ctl
        finally:
            zk.stop()


@pytest.fixture
def rc(tmp_path: Path) -> Iterator[tuple[Cluster, FakeController]]:
    with replicated_cluster(tmp_path, 2000) as cluster:
        yield cluster


@pytest.fixture
def rc_long_session(tmp_path: Path) -> Iterator[tuple[Cluster, FakeController]]:
    """Sessions outlive the replica lag: a stalled follower leaves the ISR by the leader's
    lag rule before its session expires and the controller would remove it."""
    with replicated_cluster(tmp_path, 15000) as cluster:
        yield cluster


def addr(c: Cluster, broker: int) -> str:
    return c.state.process(f"broker-{broker}").address


def segment(c: Cluster, broker: int) -> bytes:
    path = Path(c.state.process(f"broker-{broker}").data_dir) / "data" / "events-0"
    return (path / "00000000000000000000.log").read_bytes()


def metric(c: Cluster, broker: int, name: str) -> float:
    port = c.reload().process(f"broker-{broker}").metrics_port
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    raise AssertionError(f"no metric {name}")


def wait_isr(ctl: FakeController, isr: set[int], timeout_s: float = 20) -> float:
    started = time.monotonic()
    wait_until(lambda: set(ctl.state(TP).isr) == isr, timeout_s=timeout_s, what=f"ISR {isr}")
    return time.monotonic() - started


def produce_committed(leader: str, value: bytes) -> None:
    wait_until(
        lambda: produce(leader, TP, batch(value), acks=-1).error is ErrorCode.NONE,
        timeout_s=20,
        what="a replicated produce",
    )


def test_acks_all_waits_for_the_hw_consumers_stay_below_it_and_logs_end_identical(
    rc: tuple[Cluster, FakeController],
) -> None:
    c, ctl = rc
    leader = addr(c, 1)
    produce_committed(leader, b"warm-up")
    for i in range(20):
        out = produce(leader, TP, batch(*[b"r%d-%d" % (i, j) for j in range(5)]), acks=-1)
        assert out.error is ErrorCode.NONE, out
        # acks=-1 answered: the HW has passed the whole batch.
        err, hw = list_offset(leader, TP)
        assert err is ErrorCode.NONE and hw >= out.base_offset + 5
    # With both followers stalled the HW cannot pass a new batch: acks=-1 times out...
    c.cli("cluster", "pause", "broker-2")
    c.cli("cluster", "pause", "broker-3")
    try:
        stalled = produce(leader, TP, batch(b"unreplicated"), acks=-1, timeout_ms=500)
        assert stalled.error is ErrorCode.REQUEST_TIMED_OUT
        # ...and a consumer never sees the record above the HW.
        got = fetch(leader, TP, 0)
        assert got.error is ErrorCode.NONE
        assert got.offsets() and max(got.offsets()) < got.high_watermark
        assert b"unreplicated" not in got.values()
    finally:
        c.cli("cluster", "resume", "broker-2")
        c.cli("cluster", "resume", "broker-3")
    # After catch-up the three logs are byte-identical.
    wait_until(
        lambda: segment(c, 1) == segment(c, 2) == segment(c, 3),
        timeout_s=30,
        what="the followers to catch up",
    )
    assert b"unreplicated" in segment(c, 3)


def events_of(c: Cluster, name: str, event: str) -> list[dict[str, Any]]:
    return [e for e in c.log_events(name) if e["event"] == event]


def test_followers_replicate_through_one_incremental_fetch_session_each(
    rc: tuple[Cluster, FakeController],
) -> None:
    """KIP-227: each follower opens one session on the leader with a full request, then names
    only partitions whose fetch offset moved; no session is lost along the way."""
    c, _ctl = rc
    leader = addr(c, 1)
    produce_committed(leader, b"warm-up")
    sessions = "kafka_server_fetchsessioncache_numincrementalfetchsessions"
    cached = "kafka_server_fetchsessioncache_numincrementalfetchpartitionscached"
    wait_until(lambda: metric(c, 1, sessions) == 2 and metric(c, 1, cached) == 2,
               timeout_s=20, what="a fetch session per follower on the leader")  # fmt: skip
    full = "minibroker_follower_full_fetch_requests"
    before = {b: metric(c, b, full) for b in (2, 3)}
    assert all(n >= 1 for n in before.values()), before
    for i in range(20):
        out = produce(leader, TP, batch(b"s%d" % i), acks=-1)
        assert out.error is ErrorCode.NONE, out
    wait_until(
        lambda: segment(c, 1) == segment(c, 2) == segment(c, 3),
        timeout_s=20,
        what="identical logs",
    )
    assert {b: metric(c, b, full) for b in (2, 3)} == before  # every fetch was incremental
    assert metric(c, 1, sessions) == 2


def test_a_stalled_follower_leaves_the_isr_and_rejoins_with_notifications_and_metrics(
    rc_long_session: tuple[Cluster, FakeController],
) -> None:
    c, ctl = rc_long_session
    leader = addr(c, 1)
    produce_committed(leader, b"x")
    c.cli("cluster", "pause", "broker-3")
    paused_at = time.monotonic()
    # Keep producing: a follower at the leader's LEO never leaves (pitfall 1).
    deadline = time.monotonic() + 20
    while set(ctl.state(TP).isr) != {1, 2} and time.monotonic() < deadline:
        produce(leader, TP, batch(b"load"), acks=1)
        time.sleep(0.1)
    took = time.monotonic() - paused_at
    print(f"ISR shrink after {took:.2f} s (lag {LAG_MS / 1000} s, expected lag..1.5*lag)")
    state = ctl.state(TP)
    assert set(state.isr) == {1, 2}
    assert state.leader_epoch == 0 and state.leader == 1  # leader-driven: no epoch bump
    created = wait_until(
        lambda: events_of(c, "broker-1", "isr_change_notification_created"),
        timeout_s=10,
        what="the leader to write an isr_change node",
    )
    assert created[0]["path"].startswith("/isr_change_notification/isr_change_")
    assert created[0]["partitions"] == ["events-0"]
    resumed_at = time.monotonic()
    c.cli("cluster", "resume", "broker-3")
    wait_isr(ctl, {1, 2, 3})
    print(f"broker-3 back in the ISR {time.monotonic() - resumed_at:.2f} s after `cluster resume`")
    wait_until(
        lambda: len(events_of(c, "broker-1", "isr_change_notification_created")) >= 2,
        timeout_s=10,
        what="a second notification",
    )
    assert metric(c, 1, "kafka_server_replicamanager_isrshrinkspersec_total") == 1
    assert metric(c, 1, "kafka_server_replicamanager_isrexpandspersec_total") == 1
    events = [e["event"] for e in c.log_events("broker-1")]
    assert "isr_shrink" in events and "isr_expand" in events


def test_min_insync_replicas_refuses_acks_all_with_the_leader_alone(
    rc: tuple[Cluster, FakeController],
) -> None:
    c, ctl = rc
    leader = addr(c, 1)
    produce_committed(leader, b"x")
    c.cli("cluster", "pause", "broker-2")
    c.cli("cluster", "pause", "broker-3")
    try:
        y = produce(leader, TP, batch(b"y"), acks=1)  # the followers now fall behind the LEO
        leo_before = y.base_offset + 1
        wait_isr(ctl, {1})
        # The leader applies its shrink once ZooKeeper has taken it, a moment after the
        # stand-in controller can see it there; the HW then moves to the leader's own LEO.
        wait_until(
            lambda: fetch(leader, TP, 0, replica_id=None).high_watermark == leo_before,
            timeout_s=10,
            what="the HW at the leader's LEO after the shrink",
        )
        refused = produce(leader, TP, batch(b"refused"), acks=-1)
        assert refused.error is ErrorCode.NOT_ENOUGH_REPLICAS
        assert "min.insync.replicas=2" in refused.message
        accepted = produce(leader, TP, batch(b"acks-1"), acks=1)
        assert accepted.error is ErrorCode.NONE
        # Nothing of the refused batch was appended: the next offset went to the acks=1 batch.
        assert accepted.base_offset == leo_before
        assert b"refused" not in segment(c, 1)
    finally:
        c.cli("cluster", "resume", "broker-2")
        c.cli("cluster", "resume", "broker-3")


def test_a_parked_consumer_fetch_returns_as_soon_as_a_produce_commits(
    rc: tuple[Cluster, FakeController],
) -> None:
    c, _ = rc
    leader = addr(c, 1)
    produce_committed(leader, b"x")
    _, hw = list_offset(leader, TP)

    def parked_fetch() -> tuple[Fetched, float]:
        got = fetch(leader, TP, hw, max_wait_ms=20_000)
        return got, time.monotonic()

    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(parked_fetch)
        time.sleep(0.5)  # let the fetch park: the subject of the test, not a synchronisation
        produced_at = time.monotonic()
        assert produce(leader, TP, batch(b"wake-up"), acks=-1).error is ErrorCode.NONE
        fetched, returned_at = pending.result(timeout=30)
    assert fetched.values() == [b"wake-up"]
    waited_ms = (returned_at - produced_at) * 1000
    print(f"parked fetch returned {waited_ms:.0f} ms after the produce was sent")
    # Woken by the produce: far sooner than max_wait_ms (20 s) would have ended it.
    assert waited_ms < 10_000


def test_a_killed_broker_recovers_its_log_and_hw_from_disk(
    rc: tuple[Cluster, FakeController],
) -> None:
    c, ctl = rc
    leader = addr(c, 1)
    for i in range(10):
        produce_committed(leader, b"v%d" % i)
    wait_until(lambda: segment(c, 2) == segment(c, 1), timeout_s=20, what="broker-2 to catch up")
    checkpoint = (
        Path(c.state.process("broker-2").data_dir) / "data" / "replication-offset-checkpoint"
    )
    wait_until(
        lambda: checkpoint.exists() and read_offsets_checkpoint(checkpoint).get(TP, 0) >= 9,
        timeout_s=20,
        what="broker-2 to checkpoint its high watermark",
    )
    before = len(segment(c, 2))
    old_epoch = ctl.live_brokers()[2][2]
    c.cli("cluster", "kill", "broker-2")
    # A torn write at the tail, as a crash mid-append would leave it.
    data_dir = Path(c.state.process("broker-2").data_dir) / "data" / "events-0"
    with open(data_dir / "00000000000000000000.log", "ab") as f:
        f.write(b"\x00\x00\x00\x00\x00\x00\x00\x0a\x00\x00\x00\x40torn")
    c.cli("cluster", "restart", "broker-2")
    wait_until(
        lambda: ctl.live_brokers().get(2, (0, 0, 0))[2] > old_epoch,
        timeout_s=20,
        what="broker-2 to register again (after its old session expired)",
    )
    ctl.send_update_metadata()
    ctl.send_leader_and_isr([TP], to=[2])

    def reopened() -> dict[str, Any] | None:
        opens = [e for e in c.log_events("broker-2") if e["event"] == "log_opened"]
        return opens[-1] if len(opens) == 2 else None  # the first is from the first start

    opened = wait_until(
        reopened,
        timeout_s=20,
        what="broker-2 to open its log",
    )
    assert opened["log_end_offset"] == 10 + 0  # the torn tail was cut, the 10 records kept
    assert opened["high_watermark"] >= 9  # restored from replication-offset-checkpoint
    assert len(segment(c, 2)) >= before
    produce(leader, TP, batch(b"after"), acks=-1)
    wait_until(
        lambda: segment(c, 2) == segment(c, 1), timeout_s=20, what="broker-2 to catch up again"
    )


def test_hostile_input_gets_error_codes_and_the_broker_keeps_serving(
    rc: tuple[Cluster, FakeController],
) -> None:
    import struct

    import grpc

    from minibroker.rpc import broker_pb2, control_pb2, control_pb2_grpc

    c, ctl = rc
    leader = addr(c, 1)
    produce_committed(leader, b"good")
    good = segment(c, 1)
    unknown = TopicPartition("nope", 0)
    assert produce(leader, unknown, batch(b"x")).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(leader, unknown, 0).error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert fetch(leader, TP, -5).error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert fetch(leader, TP, 2**62).error is ErrorCode.OFFSET_OUT_OF_RANGE
    assert produce(leader, TP, b"\xffgarbage" * 10).error is ErrorCode.CORRUPT_MESSAGE
    legacy = bytearray(batch(b"old"))
    legacy[16] = 1  # a magic-1 (pre-0.11) message set: not supported here
    assert produce(leader, TP, bytes(legacy)).error is ErrorCode.UNSUPPORTED_VERSION
    assert produce(leader, TP, b"").error is ErrorCode.CORRUPT_MESSAGE
    flipped = bytearray(batch(b"payload"))
    flipped[-1] ^= 0xFF
    assert produce(leader, TP, bytes(flipped)).error is ErrorCode.CORRUPT_MESSAGE
    lying = bytearray(batch(b"payload"))
    struct.pack_into(">i", lying, 8, 2**30)  # batchLength far beyond the bytes sent
    assert produce(leader, TP, bytes(lying)).error is ErrorCode.CORRUPT_MESSAGE
    huge = batch(b"x" * (1024 * 1024 + 100))
    assert produce(leader, TP, huge, acks=1).error is ErrorCode.MESSAGE_TOO_LARGE
    assert produce(leader, TP, batch(b"x"), acks=2).error is ErrorCode.INVALID_REQUIRED_ACKS
    epoch = ctl.elect(TP, 1, [1, 2, 3]).leader_epoch  # epoch 1: epoch 0 is now stale
    assert (
        fetch(leader, TP, 0, current_leader_epoch=epoch - 1).error is ErrorCode.FENCED_LEADER_EPOCH
    )
    assert (
        fetch(leader, TP, 0, current_leader_epoch=epoch + 1).error is ErrorCode.UNKNOWN_LEADER_EPOCH
    )
    assert fetch(addr(c, 2), TP, 0).error is ErrorCode.NOT_LEADER_OR_FOLLOWER
    # A stale controller epoch is refused as a whole.
    with grpc.insecure_channel(leader) as ch:
        stale = control_pb2.LeaderAndIsrRequest(controller_id=1, controller_epoch=-5)
        out = control_pb2_grpc.ControlStub(ch).LeaderAndIsr(stale, timeout=10)
        assert out.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        shutdown = control_pb2_grpc.ControlStub(ch).ControlledShutdown(
            control_pb2.ControlledShutdownRequest(broker_id=1), timeout=10
        )
        assert shutdown.error_code == ErrorCode.NOT_CONTROLLER
    _ = broker_pb2
    # Still serving, and the log is what it was.
    assert segment(c, 1) == good
    assert produce(leader, TP, batch(b"still-ok"), acks=-1).error is ErrorCode.NONE
    assert localcluster.is_alive(c.reload().process("broker-1"))
