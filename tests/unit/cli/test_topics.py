"""`minibroker topics`: flags, and describe's pure part — joining ZooKeeper's view with the
brokers' reports, Kafka's filters, the kafka-topics lines and the JSON — from constructed data."""

from __future__ import annotations

import argparse
import contextlib
import json
from collections.abc import Iterator

import pytest

from minibroker.cli import topics
from minibroker.cli.main import build_parser, main
from minibroker.client.admin import (
    BrokerDescription,
    RemoteReplicaDescription,
    ReplicaDescription,
)
from minibroker.client.admin_zk import TopicInfo
from minibroker.client.topic_view import (
    BrokerReports,
    PartitionFilter,
    describe_json,
    describe_lines,
    header_line,
    partition_line,
    topic_view,
)
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import TopicPartitionStateZNode
from minibroker.runtime.zk_store import ZkStore
from tests.unit.client.memory_zk import MemoryZk


def parse(*argv: str) -> argparse.Namespace:
    return build_parser().parse_args(list(argv))


# ---- flags -------------------------------------------------------------------------------------


def test_create_flags() -> None:
    args = parse("topics", "create", "t", "--partitions", "3", "--replication-factor", "2")
    assert (args.topic, args.partitions, args.replication_factor) == ("t", 3, 2)
    assert (args.config, args.if_not_exists) == ([], False)
    assert (args.wait, args.timeout_ms) == (False, 30000)
    args = parse(
        "topics", "create", "t", "--partitions", "1", "--replication-factor", "1",
        "--config", "min.insync.replicas=2", "--config", "retention.ms=5",
        "--if-not-exists", "--wait", "--timeout-ms", "500", "--zk", "h:1",
    )  # fmt: skip
    assert args.config == ["min.insync.replicas=2", "retention.ms=5"]
    assert (args.if_not_exists, args.wait, args.timeout_ms, args.zk) == (True, True, 500, "h:1")


def test_create_needs_both_counts_or_an_assignment(capsys: pytest.CaptureFixture[str]) -> None:
    # Checked before ZooKeeper is contacted: port 1 is never dialled.
    assert main(["topics", "create", "t", "--partitions", "3", "--zk", "127.0.0.1:1"]) == 1
    assert "--replication-factor" in capsys.readouterr().err
    argv = ["topics", "create", "t", "--replica-assignment", "1:2", "--partitions", "1"]
    assert main([*argv, "--zk", "127.0.0.1:1"]) == 1
    assert "not both" in capsys.readouterr().err
    assert (
        main(["topics", "create", "t", "--replica-assignment", "1:x", "--zk", "127.0.0.1:1"]) == 1
    )
    assert "e.g. 1:2,2:3" in capsys.readouterr().err


def test_replica_assignment_is_kafka_topics_format() -> None:
    assert topics.parse_replica_assignment("1:2,2:3") == {0: (1, 2), 1: (2, 3)}
    assert topics.parse_replica_assignment("3") == {0: (3,)}


def test_list_and_describe_flags() -> None:
    assert parse("topics", "list").json is False
    assert parse("topics", "list", "--json").json is True
    args = parse("topics", "describe")
    assert (args.topic, args.filter, args.json) == (None, None, False)
    assert args.request_timeout_ms == 2000
    args = parse("topics", "describe", "t", "--under-replicated-partitions", "--json")
    assert (args.topic, args.filter, args.json) == ("t", PartitionFilter.UNDER_REPLICATED, True)
    for which in PartitionFilter:
        assert parse("topics", "describe", f"--{which.value}").filter is which


def test_describe_filters_are_exclusive(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse("topics", "describe", "--under-min-isr-partitions", "--at-min-isr-partitions")
    assert "not allowed with" in capsys.readouterr().err


def test_elect_preferred_flags() -> None:
    args = parse("topics", "elect-preferred")
    assert (args.topic, args.partition, args.wait) == (None, None, False)
    args = parse("topics", "elect-preferred", "--topic", "t", "--partition", "2", "--wait")
    assert (args.topic, args.partition, args.wait) == ("t", 2, True)


def test_partition_without_topic_is_a_one_line_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["topics", "elect-preferred", "--partition", "1", "--zk", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err == "minibroker: --partition needs --topic\n"


def test_a_bad_config_is_refused_before_connecting(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["topics", "create", "t", "--partitions", "1", "--replication-factor", "1"]
    assert main([*argv, "--config", "nope", "--zk", "127.0.0.1:1"]) == 1
    assert capsys.readouterr().err.startswith("minibroker: INVALID_CONFIG: config must be KEY=")


# ---- describe: constructed cluster -------------------------------------------------------------

T = "events"
TP0, TP1 = TopicPartition(T, 0), TopicPartition(T, 1)


def replica(
    tp: TopicPartition,
    leader: int,
    local: int,
    leo: int,
    hw: int,
    remotes: dict[int, int] | None = None,
) -> ReplicaDescription:
    return ReplicaDescription(
        tp=tp,
        is_leader=leader == local,
        leader=leader,
        leader_epoch=3,
        log_start_offset=0,
        log_end_offset=leo,
        high_watermark=hw,
        isr=(1, 2, 3) if leader == local else (),
        remote_replicas=tuple(
            RemoteReplicaDescription(b, o, 10) for b, o in (remotes or {}).items()
        ),
    )


def broker(broker_id: int, *replicas: ReplicaDescription, min_isr: str = "1") -> BrokerDescription:
    return BrokerDescription(
        broker_id=broker_id,
        broker_epoch=100 + broker_id,
        zookeeper_connect="zk:2181",
        profile="demo",
        config={"min.insync.replicas": min_isr},
        partitions={r.tp: r for r in replicas},
    )


INFO = TopicInfo(
    topic=T,
    assignment={0: (1, 2, 3), 1: (2, 3, 1)},
    config={"min.insync.replicas": "2"},
    states={0: LeaderAndIsr(1, 3, (1, 2, 3), 1), 1: LeaderAndIsr(2, 0, (2, 1), 1)},
)

# Broker 1 leads partition 0 (LEO 10; broker 2 fetched up to 10, broker 3 up to 7);
# broker 2 leads partition 1; broker 3 is registered but does not answer.
REPORTS: BrokerReports = {
    1: broker(1, replica(TP0, 1, 1, 10, 10, {2: 10, 3: 7}), replica(TP1, 2, 1, 4, 4)),
    2: broker(2, replica(TP0, 1, 2, 10, 10), replica(TP1, 2, 2, 5, 4, {3: -1, 1: 4})),
    3: None,
}


def test_kafka_header_and_partition_lines() -> None:
    view = topic_view(INFO, REPORTS)
    assert header_line(view) == (
        "Topic: events\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=2"
    )
    assert describe_lines([view]) == [
        header_line(view),
        "\tTopic: events\tPartition: 0\tLeader: 1\tReplicas: 1,2,3\tIsr: 1,2,3"
        "\tLeaderEpoch: 3\tLogStartOffsets: 0,0,?"
        "\tLogEndOffsets: 10,10,?\tHighWatermarks: 10,10,?\tLags: 0,0,3",
        "\tTopic: events\tPartition: 1\tLeader: 2\tReplicas: 2,3,1\tIsr: 2,1"
        "\tLeaderEpoch: 0\tLogStartOffsets: 0,?,0"
        "\tLogEndOffsets: 5,?,4\tHighWatermarks: 4,?,4\tLags: 0,?,1",
    ]


def test_no_leader_no_state_and_a_replica_not_hosted() -> None:
    info = TopicInfo(
        topic=T,
        assignment={0: (1, 2), 1: (2, 1)},
        config={},
        states={0: LeaderAndIsr(-1, 4, (2,), 1)},
        marked_for_deletion=True,
    )
    reports: BrokerReports = {1: broker(1), 2: broker(2, replica(TP0, -1, 2, 8, 6))}
    view = topic_view(info, reports)
    assert header_line(view).endswith("\tConfigs: \tMarkedForDeletion: true")
    p0, p1 = view.partitions
    assert partition_line(p0) == (
        "\tTopic: events\tPartition: 0\tLeader: none\tReplicas: 1,2\tIsr: 2"
        "\tLeaderEpoch: 4\tLogStartOffsets: -,0\tLogEndOffsets: -,8\tHighWatermarks: -,6\tLags: ?,?"
    )
    assert partition_line(p1, marked_for_deletion=True) == (
        "\tTopic: events\tPartition: 1\tLeader: none\tReplicas: 2,1\tIsr: \tMarkedForDeletion: true"
        "\tLeaderEpoch: none\tLogStartOffsets: -,-"
        "\tLogEndOffsets: -,-\tHighWatermarks: -,-\tLags: ?,?"
    )


def test_the_leaders_last_stable_offset_and_open_transactions_are_shown() -> None:
    import dataclasses

    leader = dataclasses.replace(
        replica(TP0, 1, 1, 10, 10, {2: 10, 3: 7}),
        last_stable_offset=6, open_transactions=((4000, 6, 1), (4001, 8, 2)),
    )  # fmt: skip
    reports: BrokerReports = {**REPORTS, 1: broker(1, leader, replica(TP1, 2, 1, 4, 4))}
    view = topic_view(INFO, reports)
    line = describe_lines([view])[1]
    assert line.endswith("\tLags: 0,0,3\tLastStableOffset: 6\tOpenTransactions: 4000@6,4001@8")
    (p0, _) = describe_json([view])
    assert p0["last_stable_offset"] == 6
    assert p0["open_transactions"] == [
        {"producer_id": 4000, "first_offset": 6, "last_timestamp": 1},
        {"producer_id": 4001, "first_offset": 8, "last_timestamp": 2},
    ]


def test_json_objects() -> None:
    out = describe_json([topic_view(INFO, REPORTS)])
    assert [(o["topic"], o["partition"]) for o in out] == [(T, 0), (T, 1)]
    assert out[0] == {
        "topic": T,
        "partition": 0,
        "leader": 1,
        "leader_epoch": 3,
        "replicas": [1, 2, 3],
        "isr": [1, 2, 3],
        "last_stable_offset": None,
        "open_transactions": [],
        "replicas_state": [
            {"broker": 1, "log_start_offset": 0,
             "log_end_offset": 10, "high_watermark": 10, "lag": 0, "reachable": True,
             "live": True, "adding": False, "removing": False},
            {"broker": 2, "log_start_offset": 0,
             "log_end_offset": 10, "high_watermark": 10, "lag": 0, "reachable": True,
             "live": True, "adding": False, "removing": False},
            {
                "broker": 3,
                "log_start_offset": None,
                "log_end_offset": None,
                "high_watermark": None,
                "lag": 3,
                "reachable": False,
                "live": True,  # registered, but it did not answer
                "adding": False,
                "removing": False,
            },
        ],
        "reassigning": False,
    }  # fmt: skip
    no_leader = TopicInfo(T, {0: (1,)}, {}, {})
    assert describe_json([topic_view(no_leader, {})])[0]["leader"] is None


FILTERS = [
    PartitionFilter.UNDER_REPLICATED,
    PartitionFilter.UNDER_MIN_ISR,
    PartitionFilter.AT_MIN_ISR,
    PartitionFilter.UNAVAILABLE,
]
UR, UMI, AMI, UA = FILTERS
LIVE = (1, 2, 3)


@pytest.mark.parametrize(
    ("leader", "isr", "topic_min_isr", "broker_min_isr", "live", "expected"),
    [
        (1, (1, 2, 3), None, "1", LIVE, []),
        (1, (1, 2, 3), "3", "1", LIVE, [AMI]),
        (1, (1, 2), "2", "1", LIVE, [UR, AMI]),
        (1, (1,), "2", "1", LIVE, [UR, UMI]),
        (1, (1,), None, "1", LIVE, [UR, AMI]),
        # No topic override: the brokers' min.insync.replicas.
        (1, (1,), None, "2", LIVE, [UR, UMI]),
        (1, (1, 2), "1", "2", LIVE, [UR]),
        # No leader: unavailable and, as Kafka counts it, under min ISR.
        (-1, (3,), None, "1", LIVE, [UR, UMI, AMI, UA]),
        # A leader that is not among the registered brokers: unavailable.
        (1, (1, 2, 3), None, "1", (2, 3), [UA]),
    ],
)
def test_filters(
    leader: int,
    isr: tuple[int, ...],
    topic_min_isr: str | None,
    broker_min_isr: str,
    live: tuple[int, ...],
    expected: list[PartitionFilter],
) -> None:
    config = {"min.insync.replicas": topic_min_isr} if topic_min_isr else {}
    info = TopicInfo(T, {0: (1, 2, 3)}, config, {0: LeaderAndIsr(leader, 0, isr, 1)})
    reports: BrokerReports = {b: broker(b, min_isr=broker_min_isr) for b in live}
    (p,) = topic_view(info, reports).partitions
    assert [f for f in FILTERS if p.matches(f)] == expected


def test_a_filter_drops_headers_and_other_partitions() -> None:
    view = topic_view(INFO, REPORTS)
    lines = describe_lines([view], PartitionFilter.UNDER_REPLICATED)
    assert len(lines) == 1 and lines[0].startswith("\tTopic: events\tPartition: 1\t")
    assert describe_lines([view], PartitionFilter.UNAVAILABLE) == []
    assert [o["partition"] for o in describe_json([view], PartitionFilter.AT_MIN_ISR)] == [1]


# ---- whole commands over an in-memory ZooKeeper ------------------------------------------------


@pytest.fixture
def mem(monkeypatch: pytest.MonkeyPatch) -> MemoryZk:
    m = MemoryZk.with_brokers(1, 2, 3)

    @contextlib.contextmanager
    def session(connect: str) -> Iterator[ZkStore]:
        yield m.as_store()

    monkeypatch.setattr(topics, "zk_session", session)
    monkeypatch.setattr(topics, "query_brokers", lambda brokers, timeout_s: dict.fromkeys(brokers))
    return m


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main([*argv, "--zk", "memory:1"])
    out, err = capsys.readouterr()
    return code, out, err


def test_create_list_describe(mem: MemoryZk, capsys: pytest.CaptureFixture[str]) -> None:
    create = ("topics", "create", "t", "--partitions", "2", "--replication-factor", "3")
    assert run(capsys, *create, "--config", "retention.ms=10") == (0, "Created topic t.\n", "")
    assert run(capsys, *create) == (
        1,
        "",
        "minibroker: TOPIC_ALREADY_EXISTS: Topic 't' already exists.\n",
    )
    assert run(capsys, *create, "--if-not-exists") == (0, "", "")
    assert run(capsys, "topics", "list") == (0, "t\n", "")
    assert run(capsys, "topics", "list", "--json") == (0, '["t"]\n', "")
    code, out, _ = run(capsys, "topics", "describe", "t")
    lines = out.splitlines()
    assert code == 0 and lines[0] == (
        "Topic: t\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: retention.ms=10"
    )
    # No controller here: no state, no leader; the brokers "did not answer".
    assert lines[1].startswith("\tTopic: t\tPartition: 0\tLeader: none\tReplicas: ")
    assert lines[1].endswith(
        "\tIsr: \tLeaderEpoch: none\tLogStartOffsets: ?,?,?"
        "\tLogEndOffsets: ?,?,?\tHighWatermarks: ?,?,?\tLags: ?,?,?"
    )
    code, out, err = run(capsys, "topics", "describe", "nope")
    assert code == 1
    assert err == "minibroker: UNKNOWN_TOPIC_OR_PARTITION: Topic 'nope' does not exist.\n"


def test_create_wait_times_out_naming_the_leaderless_partitions(
    mem: MemoryZk, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ("topics", "create", "t", "--partitions", "2", "--replication-factor", "1")
    code, out, err = run(capsys, *argv, "--wait", "--timeout-ms", "100")
    assert (code, out) == (1, "Created topic t.\n")
    assert err == (
        "minibroker: timed out after 100 ms waiting for leaders of topic 't' "
        "(partitions without one: 0,1); is a controller running?\n"
    )
    for p in (0, 1):
        state = LeaderAndIsr(1, 0, (1,), 1)
        path = TopicPartitionStateZNode.path(TopicPartition("t", p))
        mem.create(path, TopicPartitionStateZNode.encode(state), makepath=True)
    assert run(capsys, *argv, "--if-not-exists", "--wait", "--timeout-ms", "100") == (0, "", "")


def test_elect_preferred_writes_the_znode_once(
    mem: MemoryZk, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, "topics", "elect-preferred")[2] == (
        "minibroker: the cluster has no topics: there is nothing to elect\n"
    )
    run(capsys, "topics", "create", "t", "--partitions", "2", "--replication-factor", "1")
    assert run(capsys, "topics", "elect-preferred", "--topic", "t") == (
        0,
        "Successfully started preferred replica election for partitions t-0, t-1.\n",
        "",
    )
    assert json.loads(mem.nodes["/admin/preferred_replica_election"])["partitions"] == [
        {"topic": "t", "partition": 0},
        {"topic": "t", "partition": 1},
    ]
    code, _, err = run(capsys, "topics", "elect-preferred", "--wait", "--timeout-ms", "100")
    assert code == 1 and "already in progress" in err
