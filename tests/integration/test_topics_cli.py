"""`minibroker topics` against a real 3-broker cluster: the znodes `create` and `elect-preferred`
write (read back with zk_layout's decoders), and `describe` joining ZooKeeper's partition states
with what the brokers report over DescribeBroker, filters included."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from minibroker.core.errors import ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    ConfigEntityZNode,
    PreferredReplicaElectionZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkNodeExists
from tests.integration.conftest import Cluster
from tests.integration.controller_helper import FakeController
from tests.integration.rpc import batch, produce

pytestmark = pytest.mark.integration

T = "events"
TP0, TP1 = TopicPartition(T, 0), TopicPartition(T, 1)


def topics(c: Cluster, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return c.cli("topics", *args, check=check)


def addr(c: Cluster, broker: int) -> str:
    return c.state.process(f"broker-{broker}").address


def describe_json(c: Cluster, *args: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads(
        topics(c, "describe", *args, "--json", "--request-timeout-ms", "1000").stdout
    )
    return out


def background(c: Cluster, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "minibroker.cli.main", "topics", *args, "--dir", str(c.dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


@pytest.fixture
def finished() -> Iterator[list[subprocess.Popen[str]]]:
    """Background CLI processes of a test; any still running at the end is killed."""
    procs: list[subprocess.Popen[str]] = []
    yield procs
    for p in procs:
        if p.poll() is None:
            p.kill()
            p.wait(timeout=10)


# ---- create, list, errors ----------------------------------------------------------------------


def test_create_writes_kafkas_znodes_and_list_shows_the_topic(c: Cluster) -> None:
    out = topics(
        c, "create", T, "--partitions", "3", "--replication-factor", "3",
        "--config", "min.insync.replicas=2",
    )  # fmt: skip
    assert out.stdout == f"Created topic {T}.\n"
    data, _ = c.zk.get(TopicZNode.path(T))
    assert json.loads(data or b"")["version"] == 2
    assignment = TopicZNode.decode(T, data).partitions
    assert sorted(assignment) == [0, 1, 2]
    assert all(sorted(replicas) == [1, 2, 3] for replicas in assignment.values())
    assert sorted(replicas[0] for replicas in assignment.values()) == [1, 2, 3]
    config, _ = c.zk.get(ConfigEntityZNode.path("topics", T))
    assert config == b'{"version":1,"config":{"min.insync.replicas":"2"}}'

    topics(c, "create", "plain", "--partitions", "1", "--replication-factor", "1")
    assert ConfigEntityZNode.decode(c.zk.get(ConfigEntityZNode.path("topics", "plain"))[0]) == {}
    assert topics(c, "list").stdout == f"{T}\nplain\n"
    assert json.loads(topics(c, "list", "--json").stdout) == [T, "plain"]


@pytest.mark.parametrize(
    ("args", "stderr"),
    [
        (
            ("too-many", "--partitions", "1", "--replication-factor", "4"),
            "minibroker: INVALID_REPLICATION_FACTOR: Replication factor: 4 larger than "
            "available brokers: 3.\n",
        ),
        (
            ("bad/name", "--partitions", "1", "--replication-factor", "1"),
            'minibroker: INVALID_TOPIC_EXCEPTION: Topic name "bad/name" is illegal, it contains '
            "a character other than ASCII alphanumerics, '.', '_' and '-'\n",
        ),
        (
            ("zero", "--partitions", "0", "--replication-factor", "1"),
            "minibroker: INVALID_PARTITIONS: Number of partitions must be larger than 0.\n",
        ),
        (
            ("cfg", "--partitions", "1", "--replication-factor", "1", "--config", "x.y=1"),
            "minibroker: INVALID_CONFIG: Unknown topic config name: x.y\n",
        ),
    ],
)
def test_refused_creations_are_one_line_errors_and_write_nothing(
    c: Cluster, args: tuple[str, ...], stderr: str
) -> None:
    out = topics(c, "create", *args, check=False)
    assert (out.returncode, out.stdout, out.stderr) == (1, "", stderr)
    assert c.zk.exists(TopicZNode.path(args[0])) is None
    assert c.zk.exists(ConfigEntityZNode.path("topics", args[0])) is None
    assert topics(c, "list").stdout == ""


def test_an_existing_topic_is_an_error_unless_if_not_exists(c: Cluster) -> None:
    create = ("create", T, "--partitions", "1", "--replication-factor", "2")
    topics(c, *create)
    before = c.zk.get(TopicZNode.path(T))
    again = topics(c, *create, check=False)
    assert (again.returncode, again.stderr) == (
        1,
        f"minibroker: TOPIC_ALREADY_EXISTS: Topic '{T}' already exists.\n",
    )
    quiet = topics(c, *create, "--if-not-exists")
    assert (quiet.stdout, quiet.stderr) == ("", "")
    assert c.zk.get(TopicZNode.path(T)) == before


def test_create_wait_returns_once_every_partition_has_a_leader(
    c: Cluster, finished: list[subprocess.Popen[str]]
) -> None:
    proc = background(c, "create", T, "--partitions", "2", "--replication-factor", "2", "--wait")
    finished.append(proc)
    wait_until(lambda: c.zk.exists(TopicZNode.path(T)), timeout_s=20, what="the assignment")
    # Play the controller's part unless the real one is quicker (either way: states appear).
    assignment = TopicZNode.decode(T, c.zk.get(TopicZNode.path(T))[0]).partitions
    for p, replicas in assignment.items():
        state = LeaderAndIsr(replicas[0], 0, replicas, 1)
        path = TopicPartitionStateZNode.path(TopicPartition(T, p))
        with contextlib.suppress(ZkNodeExists):
            c.zk.create(path, TopicPartitionStateZNode.encode(state), makepath=True)
    out, err = proc.communicate(timeout=30)
    assert (proc.returncode, out, err) == (0, f"Created topic {T}.\n", "")


# ---- describe ------------------------------------------------------------------------------------


def produce_committed(c: Cluster, tp: TopicPartition, *values: bytes) -> None:
    leader = addr(c, FakeController(c.zk).state(tp).leader)
    wait_until(
        lambda: produce(leader, tp, batch(*values), acks=-1).error is ErrorCode.NONE,
        timeout_s=20,
        what=f"a replicated produce to {tp}",
    )


def all_caught_up(c: Cluster, partition: int, leo: int) -> bool:
    (p,) = [o for o in describe_json(c, T) if o["partition"] == partition]
    return all(
        (s["log_end_offset"], s["high_watermark"], s["lag"], s["reachable"]) == (leo, leo, 0, True)
        for s in p["replicas_state"]
    )


def test_describe_shows_zookeepers_state_and_the_brokers_offsets(c: Cluster) -> None:
    FakeController(c.zk).create_topic(T, {0: [1, 2, 3], 1: [2, 3, 1]}, {"min.insync.replicas": "2"})
    produce_committed(c, TP0, b"a", b"b", b"c")
    wait_until(lambda: all_caught_up(c, 0, 3), timeout_s=20, what="LEO = HW = 3 everywhere")
    wait_until(lambda: all_caught_up(c, 1, 0), timeout_s=20, what="partition 1 known everywhere")

    states = {p: FakeController(c.zk).state(TopicPartition(T, p)) for p in (0, 1)}
    lines = topics(c, "describe", T).stdout.splitlines()
    assert lines[0] == (
        f"Topic: {T}\tPartitionCount: 2\tReplicationFactor: 3\tConfigs: min.insync.replicas=2"
    )
    for line, (p, replicas, leo) in zip(lines[1:], [(0, "1,2,3", 3), (1, "2,3,1", 0)], strict=True):
        s = states[p]
        assert line == (
            f"\tTopic: {T}\tPartition: {p}\tLeader: {s.leader}\tReplicas: {replicas}"
            f"\tIsr: {','.join(map(str, s.isr))}\tLeaderEpoch: {s.leader_epoch}"
            f"\tLogStartOffsets: 0,0,0"
            f"\tLogEndOffsets: {leo},{leo},{leo}\tHighWatermarks: {leo},{leo},{leo}\tLags: 0,0,0"
            f"\tLastStableOffset: {leo}"  # no transaction: the LSO is the HW
        )

    (p0,) = [o for o in describe_json(c) if o["partition"] == 0]
    assert p0 == {
        "topic": T,
        "partition": 0,
        "leader": states[0].leader,
        "leader_epoch": states[0].leader_epoch,
        "replicas": [1, 2, 3],
        "isr": list(states[0].isr),
        "last_stable_offset": 3,
        "open_transactions": [],
        "replicas_state": [
            {"broker": b, "log_start_offset": 0, "log_end_offset": 3, "high_watermark": 3,
             "lag": 0, "reachable": True, "live": True, "adding": False, "removing": False}
            for b in (1, 2, 3)
        ],
        "reassigning": False,
    }  # fmt: skip
    unknown = topics(c, "describe", "nope", check=False)
    assert (unknown.returncode, unknown.stderr) == (
        1,
        "minibroker: UNKNOWN_TOPIC_OR_PARTITION: Topic 'nope' does not exist.\n",
    )


def filtered(c: Cluster, flag: str) -> list[tuple[str, int]]:
    return [(o["topic"], o["partition"]) for o in describe_json(c, f"--{flag}")]


def test_describe_filters_with_a_stalled_follower(c: Cluster) -> None:
    ctl = FakeController(c.zk)
    ctl.create_topic(T, {0: [1, 2, 3]}, {"min.insync.replicas": "2"})
    # A partition whose only replica is no broker: nobody can lead it, it has no ISR.
    c.zk.create(TopicZNode.path("orphan"), TopicZNode.encode(TopicAssignment({0: (7,)})))
    produce_committed(c, TP0, b"x")
    orphan = ("orphan", 0)
    assert filtered(c, "under-replicated-partitions") == [orphan]
    assert filtered(c, "under-min-isr-partitions") == [orphan]
    assert filtered(c, "unavailable-partitions") == [orphan]
    assert filtered(c, "at-min-isr-partitions") == []

    def broker_3_left_the_isr() -> bool:
        # Keep producing: a follower at the leader's LEO never leaves the ISR (pitfall 1).
        produce(addr(c, 1), TP0, batch(b"more"), acks=1)
        return set(ctl.state(TP0).isr) == {1, 2}

    c.cli("cluster", "pause", "broker-3")
    try:
        # The leader drops broker-3 after the 3 s lag (or the controller does when broker-3's
        # ZooKeeper session expires).
        wait_until(
            broker_3_left_the_isr, timeout_s=30, interval_s=0.2, what="broker-3 to leave the ISR"
        )
        assert filtered(c, "under-replicated-partitions") == [(T, 0), orphan]
        assert filtered(c, "at-min-isr-partitions") == [(T, 0)]
        assert filtered(c, "under-min-isr-partitions") == [orphan]
        assert filtered(c, "unavailable-partitions") == [orphan]
        (p0,) = describe_json(c, T)
        stalled = p0["replicas_state"][2]
        assert (stalled["broker"], stalled["reachable"], stalled["log_end_offset"]) == (
            3,
            False,
            None,
        )
        if stalled["live"]:  # the leader saw it fetch before the pause, then moved on
            assert stalled["lag"] > 0
        else:  # its session expired too: a broker that is gone has no lag to show (issue 26)
            assert stalled["lag"] is None
        (line,) = topics(c, "describe", "--under-replicated-partitions", T).stdout.splitlines()
        assert "\tIsr: 1,2\t" in line
        assert line.split("\tLogEndOffsets: ")[1].split("\t")[0].endswith(",?")
    finally:
        c.cli("cluster", "resume", "broker-3")


# ---- elect-preferred -----------------------------------------------------------------------------


def test_elect_preferred_writes_the_legacy_znode(
    c: Cluster, finished: list[subprocess.Popen[str]]
) -> None:
    for name in ("b", "a"):
        topics(c, "create", name, "--partitions", "2", "--replication-factor", "1")
    path = PreferredReplicaElectionZNode.path
    # Stop the controllers so that the request stays for us to read.
    controllers = [p.name for p in c.state.by_role("controller")]
    for name in controllers:
        c.cli("cluster", "pause", name)
    try:
        out = topics(c, "elect-preferred")
        assert out.stdout == (
            "Successfully started preferred replica election for partitions a-0, a-1, b-0, b-1.\n"
        )
        data, _ = c.zk.get(path)
        assert json.loads(data or b"") == {
            "version": 1,
            "partitions": [{"topic": t, "partition": p} for t in ("a", "b") for p in (0, 1)],
        }
        busy = topics(c, "elect-preferred", "--topic", "a", check=False)
        assert busy.returncode == 1
        assert busy.stderr.startswith("minibroker: a preferred replica election is already in")
        assert c.zk.get(path)[0] == data

        c.zk.delete(path)
        proc = background(c, "elect-preferred", "--topic", "b", "--partition", "1", "--wait")
        finished.append(proc)
        got = wait_until(lambda: c.zk.get_or_none(path), timeout_s=20, what="the request")
        assert PreferredReplicaElectionZNode.decode(got[0]) == (TopicPartition("b", 1),)
        c.zk.delete(path)  # what the controller does once it has elected
        out_text, err = proc.communicate(timeout=30)
        assert (proc.returncode, err) == (0, "")
        assert out_text.endswith("Preferred replica election finished.\n")
    finally:
        for name in controllers:
            c.cli("cluster", "resume", name)
