"""The dashboard's state, diff and history as pure functions of ZooKeeper's copy and the
brokers' reports."""

from __future__ import annotations

from typing import Any

from minibroker.client.admin import (
    BrokerDescription,
    RemoteReplicaDescription,
    ReplicaDescription,
)
from minibroker.client.admin_zk import TopicInfo
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import BrokerRegistration
from minibroker.dashboard.model import History, Inputs, StateBuilder, build_state, diff

TP = TopicPartition("demo", 0)


def reg(b: int) -> tuple[BrokerRegistration, int]:
    return BrokerRegistration(b, (f"PLAINTEXT://127.0.0.1:{9090 + b}",)), 1000 + b


def report(
    b: int, leo: int, hw: int, *, leader: int = 1, remotes: dict[int, tuple[int, int]] | None = None
) -> BrokerDescription:
    remote = tuple(
        RemoteReplicaDescription(r, r_leo, ago) for r, (r_leo, ago) in (remotes or {}).items()
    )
    desc = ReplicaDescription(
        TP, b == leader, leader, 3, 0, leo, hw, (1, 2, 3), remote if b == leader else ()
    )
    return BrokerDescription(b, 1000 + b, "zk", "demo", {"min.insync.replicas": "2"}, {TP: desc})


def inputs(isr: tuple[int, ...], reports: dict[int, BrokerDescription | None], **kw: Any) -> Inputs:
    state = LeaderAndIsr(leader=1, leader_epoch=3, isr=isr, controller_epoch=2, zk_version=5)
    topic = TopicInfo("demo", {0: (1, 2, 3)}, {}, {0: state})
    values: dict[str, Any] = dict(
        zk_connect="127.0.0.1:2181",
        zk_connected=True,
        zk_error="",
        brokers={b: reg(b) for b in (1, 2, 3)},
        controller=101,
        controller_epoch=2,
        controllers={101: ("PLAINTEXT://127.0.0.1:9200",), 102: ("PLAINTEXT://127.0.0.1:9201",)},
        topics=[topic],
        reports=reports,
    )
    values.update(kw)
    return Inputs(**values)


def healthy_reports(ago_2: int = 120, ago_3: int = 4700) -> dict[int, BrokerDescription | None]:
    return {
        1: report(1, 10, 8, remotes={2: (10, ago_2), 3: (8, ago_3)}),
        2: report(2, 10, 8),
        3: report(3, 8, 8),
    }


def test_a_partition_shows_each_replica_with_its_isr_membership_and_catch_up_time() -> None:
    state = build_state(inputs((1, 2), healthy_reports()))
    (p,) = state["partitions"]
    assert (p["key"], p["leader"], p["leader_epoch"], p["isr"]) == ("demo-0", 1, 3, [1, 2])
    cells = {r["broker"]: r for r in p["replicas_state"]}
    assert [cells[b]["in_isr"] for b in (1, 2, 3)] == [True, True, False]
    assert (cells[3]["log_end_offset"], cells[3]["high_watermark"], cells[3]["lag"]) == (8, 8, 2)
    # To the second: a follower fetching all the time does not change the state every fetch.
    assert [cells[b]["caught_up_ms_ago"] for b in (1, 2, 3)] == [0, 0, 4000]
    assert state["health"] == {
        "UnderReplicatedPartitions": 1,
        "UnderMinIsrPartitionCount": 0,
        "OfflinePartitionsCount": 0,
    }
    assert state["controller"] == {
        "active": 101, "name": "controller-1", "epoch": 2, "standby": ["controller-2"]
    }  # fmt: skip
    assert [b["broker_epoch"] for b in state["brokers"]] == [1001, 1002, 1003]
    assert state["banners"] == []


def test_a_dead_leader_makes_the_partition_offline_and_a_silent_broker_a_banner() -> None:
    reports = healthy_reports()
    reports[2] = None
    brokers = {b: reg(b) for b in (2, 3)}  # broker 1 (the leader) is not registered
    state = build_state(inputs((1,), reports, brokers=brokers, report_errors={2: "UNAVAILABLE"}))
    assert state["health"]["OfflinePartitionsCount"] == 1
    assert state["health"]["UnderMinIsrPartitionCount"] == 1
    assert state["health"]["UnderReplicatedPartitions"] == 0  # Kafka counts it on live leaders
    assert [(b["name"], b["alive"]) for b in state["brokers"]] == [
        ("broker-1", False), ("broker-2", True), ("broker-3", True)
    ]  # fmt: skip
    assert state["banners"] == ["broker-2 is registered but did not answer (UNAVAILABLE); retrying"]


def test_zookeeper_unreachable_is_one_banner() -> None:
    state = build_state(
        inputs((), {}, zk_connected=False, zk_error="timed out", brokers={}, topics=[])
    )
    assert state["banners"] == ["ZooKeeper at 127.0.0.1:2181 is unreachable (timed out); retrying"]


def test_diff_sends_only_what_changed() -> None:
    a = build_state(inputs((1, 2, 3), healthy_reports(ago_3=100)))
    assert diff(a, build_state(inputs((1, 2, 3), healthy_reports(ago_3=900)))) is None
    b = build_state(inputs((1, 2), healthy_reports()))
    patch = diff(a, b)
    assert patch is not None
    assert [p["isr"] for p in patch["partitions"]] == [[1, 2]]
    assert set(patch["cluster"]) == {"health"} and patch["removed"] == []
    gone = build_state(inputs((1, 2), healthy_reports(), topics=[]))
    assert diff(b, gone)["removed"] == ["demo-0"]  # type: ignore[index]


def test_history_samples_only_changes_and_forgets_after_its_window() -> None:
    h = History(window_ms=10_000)
    s1 = build_state(inputs((1, 2, 3), healthy_reports()))
    h.record(s1["partitions"], [], 1_000)
    h.record(s1["partitions"], [], 2_000)  # nothing moved: no sample
    more = healthy_reports()
    more[1] = report(1, 12, 10, remotes={2: (12, 0), 3: (8, 0)})
    h.record(build_state(inputs((1, 2, 3), more))["partitions"], [], 3_000)
    assert [(s["t"], s["hw"], s["leo"]) for s in h.of("demo-0", 3_000)] == [
        (1_000, 8, {"1": 10, "2": 10, "3": 8}),
        (3_000, 10, {"1": 12, "2": 10, "3": 8}),
    ]
    h.record(build_state(inputs((1, 2, 3), healthy_reports()))["partitions"], [], 20_000)
    # The newest sample before the window stays: it is where the chart's lines start.
    assert [s["t"] for s in h.of("demo-0", 20_000)] == [3_000, 20_000]
    assert [s["t"] for s in h.of("demo-0", 40_000)] == [20_000]
    h.record([], ["demo-0"], 41_000)
    assert h.of("demo-0", 41_000) == []


def test_the_builder_keeps_a_quiet_partitions_object_and_remakes_a_changed_one() -> None:
    builder = StateBuilder()
    reports = healthy_reports()
    first = builder.build(inputs((1, 2, 3), reports))["partitions"][0]
    assert builder.build(inputs((1, 2, 3), dict(reports)))["partitions"][0] is first
    moved = dict(reports)
    moved[2] = report(2, 11, 8)
    again = builder.build(inputs((1, 2, 3), moved))["partitions"][0]
    assert again is not first and again["replicas_state"][1]["log_end_offset"] == 11
    shrunk = builder.build(inputs((1, 2), moved))["partitions"][0]
    assert shrunk["isr"] == [1, 2] and shrunk["replicas_state"][2]["in_isr"] is False
    silent = dict(moved)
    silent[3] = None
    gone = builder.build(inputs((1, 2), silent))["partitions"][0]
    assert gone["replicas_state"][2]["reachable"] is False
    assert gone == build_state(inputs((1, 2), silent))["partitions"][0]


def test_each_broker_shows_its_rack_the_machine_on_a_swarm() -> None:
    racked = {
        b: (BrokerRegistration(b, (f"PLAINTEXT://10.0.0.{b}:9092",), rack=f"node-{b}"), 1000 + b)
        for b in (1, 2)
    }
    state = build_state(inputs((1, 2), healthy_reports(), brokers=racked))
    assert {b["name"]: b["rack"] for b in state["brokers"]} == {
        "broker-1": "node-1", "broker-2": "node-2", "broker-3": ""
    }  # fmt: skip
