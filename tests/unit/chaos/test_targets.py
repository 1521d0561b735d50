"""Target syntax and alias resolution with a fake "who leads" reader (no ZooKeeper), on the
fake backend and on the compose backend, which resolve alike."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import pytest

from minibroker.chaos import (
    ChaosError,
    LeadershipReader,
    Resolved,
    parse_target,
    resolve_target,
)
from minibroker.chaos.compose import ComposeBackend
from minibroker.chaos.targets import Target
from minibroker.core.types import TopicPartition
from minibroker.runtime.zk_store import ZkConnectionError
from tests.unit.chaos.fakes import FakeBackend, FakeLeadership, compose_cluster, process_nodes


@pytest.mark.parametrize(
    ("text", "topic", "expected"),
    [
        ("broker-2", None, Target("broker-2")),
        ("controller-1", None, Target("controller-1")),
        ("zookeeper", None, Target("zookeeper")),
        ("controller", None, Target("controller", "controller")),
        ("leader", "demo", Target("leader", "leader", TopicPartition("demo", 0))),
        ("follower", "t", Target("follower", "follower", TopicPartition("t", 0))),
        ("leader:demo-2", None, Target("leader:demo-2", "leader", TopicPartition("demo", 2))),
        ("follower:my-topic-10", "x", Target("follower:my-topic-10", "follower",
                                             TopicPartition("my-topic", 10))),
    ],
)  # fmt: skip
def test_targets_parse(text: str, topic: str | None, expected: Target) -> None:
    assert parse_target(text, topic) == expected


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("leader", "'leader' needs a topic: give --topic TOPIC (partition 0) or leader:TOPIC-P"),
        ("follower", "'follower' needs a topic"),
        ("leader:demo", "bad target 'leader:demo'"),
        ("broker", "bad target 'broker'"),
        ("broker-x", "bad target 'broker-x'"),
    ],
)
def test_bad_targets_say_what_is_expected(text: str, complaint: str) -> None:
    with pytest.raises(ChaosError, match=re.escape(complaint.split(" or ")[0])):
        parse_target(text)


@pytest.mark.parametrize(
    ("target", "who", "expected"),
    [
        ("leader", FakeLeadership(leaders=[2]), Resolved("leader", "broker-2", "leader of t-0")),
        ("follower", FakeLeadership(leaders=[1], isr=(1, 3, 2)),
         Resolved("follower", "broker-2", "in-sync follower of t-0")),
        ("controller", FakeLeadership(controller=102),
         Resolved("controller", "controller-2", "active controller")),
        ("leader:other-4", FakeLeadership(leaders=[3]),
         Resolved("leader:other-4", "broker-3", "leader of other-4")),
        ("broker-1", FakeLeadership(leaders=[None]), Resolved("broker-1", "broker-1")),
    ],
)  # fmt: skip
def test_aliases_resolve_to_nodes(target: str, who: FakeLeadership, expected: Resolved) -> None:
    got = resolve_target(FakeBackend(process_nodes()), target, topic="t", open_reader=who.open)
    assert got == expected
    assert who.sessions == (0 if expected.reason == "" else 1)  # names need no ZooKeeper


def test_leader_and_follower_read_the_partition_they_name() -> None:
    who = FakeLeadership(leaders=[1])
    resolve_target(FakeBackend(process_nodes()), "leader", topic="t", open_reader=who.open)
    resolve_target(FakeBackend(process_nodes()), "follower:u-3", open_reader=who.open)
    assert who.asked == [TopicPartition("t", 0), TopicPartition("u", 3)]


@pytest.mark.parametrize(
    ("target", "who", "complaint"),
    [
        ("leader", FakeLeadership(leaders=[None]), "partition 0 of topic 't' has no leader"),
        ("leader", FakeLeadership(leaders=[-1]), "partition 0 of topic 't' has no leader"),
        ("follower", FakeLeadership(leaders=[2], isr=(2,)),
         "partition 0 of topic 't' has no in-sync follower"),
        ("controller", FakeLeadership(controller=None), "no controller is elected"),
        ("leader", FakeLeadership(leaders=[7]),
         "'leader' is broker 7, which is not a node of this cluster"),
        ("broker-5", FakeLeadership(), "no process named 'broker-5'"),
    ],
)  # fmt: skip
def test_unresolvable_targets_say_why(target: str, who: FakeLeadership, complaint: str) -> None:
    with pytest.raises(ChaosError, match=re.escape(complaint)):
        resolve_target(FakeBackend(process_nodes()), target, topic="t", open_reader=who.open)


def test_compose_nodes_resolve_like_processes() -> None:
    compose = ComposeBackend("minibroker", "127.0.0.1:2181", client=compose_cluster())
    who = FakeLeadership(leaders=[3], controller=101)
    got = resolve_target(compose, "leader", topic="t", open_reader=who.open)
    assert got == Resolved("leader", "broker-3", "leader of t-0")
    assert resolve_target(compose, "controller", open_reader=who.open).name == "controller-1"


def test_zookeeper_errors_are_chaos_errors() -> None:
    @contextlib.contextmanager
    def unreachable() -> Iterator[LeadershipReader]:
        raise ZkConnectionError("could not connect to ZooKeeper at 127.0.0.1:1 within 5000 ms")
        yield FakeLeadership()  # a generator, never reached

    backend = FakeBackend(process_nodes())
    with pytest.raises(ChaosError) as info:
        resolve_target(backend, "controller", open_reader=unreachable)
    assert str(info.value) == (
        "cannot resolve 'controller': reading ZooKeeper at 127.0.0.1:1 failed: could not "
        "connect to ZooKeeper at 127.0.0.1:1 within 5000 ms"
    )
