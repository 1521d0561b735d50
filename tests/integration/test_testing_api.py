"""The test bed's Python API (issue 39 §1, minibroker/testing) on real processes: a cluster up
in a `with` block, unmodified Kafka clients through its configs, faults by role resolved when
applied, waits that return the event they waited for (or say what they saw), and nothing left
behind."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker import localcluster
from minibroker.runtime.clock import now_ms
from minibroker.runtime.waiting import wait_until
from minibroker.testing import (
    Cluster,
    WaitTimeout,
    active_controller,
    coordinator_of,
    follower_of,
    leader_of,
)

pytestmark = pytest.mark.integration


# A paused follower must leave the ISR through its leader (lag 2 s, checked every 1 s) well
# before its ZooKeeper session expires (10 s), when the controller would remove it instead.
SETTINGS = {
    "group.initial.rebalance.delay.ms": 0,
    "replica.lag.time.max.ms": 2000,
    "zookeeper.session.timeout.ms": 10_000,
}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(settings=SETTINGS) as c:
        c.create_topic("orders", partitions=2, replication_factor=3, min_insync_replicas=2)
        yield c


def produce(c: Cluster, n: int, partition: int = 0, acks: str = "all") -> None:
    from confluent_kafka import Producer

    p = Producer(c.confluent_config(acks=acks, message_timeout_ms=30_000))
    errors: list[Any] = []

    def delivered(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    for i in range(n):
        p.produce("orders", b"%d" % i, partition=partition, on_delivery=delivered)
    assert p.flush(60) == 0 and not errors, errors


def test_kafka_clients_write_through_its_configs_and_the_state_shows_it(cluster: Cluster) -> None:
    before = cluster.partition("orders", 0).high_watermark or 0
    produce(cluster, 20)
    state = cluster.partition("orders", 0)
    assert state.fully_replicated and state.leader in state.replicas
    assert state.high_watermark == before + 20  # acks=all: every ISR member holds them
    assert {r.log_end_offset for r in state.replica_states.values()} == {before + 20}
    assert cluster.leader("orders", 0) == state.leader and cluster.isr("orders", 0) == state.isr
    assert cluster.controller() in (101, 102)
    assert sorted(cluster.nodes) == sorted(
        ["zookeeper", "broker-1", "broker-2", "broker-3", "controller-1", "controller-2"]
    )


def test_faults_by_role_and_the_waits_that_return_their_events(cluster: Cluster) -> None:
    paused = cluster.pause(follower_of("orders", 0))
    assert paused.action == "pause" and paused.node.startswith("broker-")
    assert paused.where.startswith("pid ")
    # A follower at the leader's LEO is never out of sync (Kafka 2.6's isFollowerOutOfSync):
    # records it does not fetch make it lag.
    produce(cluster, 5, acks="1")
    shrink = cluster.wait_for_isr_shrink("orders", 0)
    assert shrink.kind == "isr_shrink" and shrink.tp == "orders-0"
    follower = int(paused.node.removeprefix("broker-"))
    assert shrink["changed"] == [follower] and follower not in shrink["isr"]
    assert shrink.ts_ms >= paused.at_ms
    cluster.resume(paused.node)
    assert cluster.wait_for_isr_expand("orders", 0, since=shrink.ts_ms).tp == "orders-0"

    leader = cluster.leader("orders", 0)
    killed = cluster.kill(leader_of("orders", 0))
    assert killed.node == f"broker-{leader}"  # resolved when applied
    elected = cluster.wait_for_new_leader("orders", 0)
    assert elected.kind == "leader_elected" and elected["leader"] != leader
    produce(cluster, 5)  # min.insync.replicas 2 of the 2 left
    cluster.start(killed.node)

    controller = cluster.controller()
    stopped = cluster.stop(active_controller())
    assert stopped.node == f"controller-{controller - 100}"  # type: ignore[operator]
    change = cluster.wait_for_controller_change()
    assert change["controller_id"] != controller
    cluster.start(stopped.node)
    replicated = cluster.wait_until_fully_replicated("orders")
    assert [p.fully_replicated for p in replicated["orders"]] == [True, True]

    kinds = {e.kind for e in cluster.events(paused.at_ms)}
    assert {"isr_shrink", "isr_expand", "leader_elected", "controller_elected"} <= kinds
    assert cluster.events(killed.at_ms, "leader_elected")[0] == elected


def test_a_group_coordinator_by_role_is_the_one_kafka_clients_are_told(cluster: Cluster) -> None:
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient

    produce(cluster, 1, partition=1)  # something to read, whatever ran before
    consumer = Consumer(cluster.confluent_config(group_id="billing", auto_offset_reset="earliest"))
    try:
        consumer.subscribe(["orders"])
        wait_until(lambda: consumer.poll(0.5) is not None, timeout_s=60, what="a record read")
        admin = AdminClient(cluster.confluent_config())
        (future,) = admin.describe_consumer_groups(["billing"]).values()
        told = future.result(timeout=30).coordinator.id
        assert cluster.coordinator(group="billing") == told
        killed = cluster.kill(coordinator_of(group="billing"))
        assert killed.node == f"broker-{told}"
        assert "__consumer_offsets-" in killed.reason
        cluster.start(killed.node)
    finally:
        consumer.close()


def test_a_wait_that_times_out_says_what_it_saw(cluster: Cluster) -> None:
    # Since an hour from now: no shrink can count, however slow the machine (a real shrink
    # within the second, a follower late under load, once made this test fail).
    with pytest.raises(WaitTimeout) as caught:
        cluster.wait_for_isr_shrink("orders", 1, since=now_ms() + 3_600_000, timeout_s=1)
    message = str(caught.value)
    assert message.startswith("no isr shrink of orders-1 within 1 s (since ")
    assert "now leader" in message and "ISR [" in message


def test_nothing_is_left_behind_also_when_the_block_fails() -> None:
    processes: list[localcluster.ProcessInfo] = []
    directory = Path("/nonexistent")
    failing = pytest.raises(RuntimeError, match="the test failed")
    with failing, Cluster(brokers=1, controllers=1) as c:
        processes = list(c.state.processes)
        directory = c.directory
        assert all(localcluster.is_alive(p) for p in processes)
        raise RuntimeError("the test failed")
    assert processes
    assert not any(localcluster.is_alive(p) for p in processes)
    assert not Path(directory).exists()
