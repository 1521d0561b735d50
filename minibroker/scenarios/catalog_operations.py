"""Scenarios of planned operations under faults (issue 26), with the same independent checker as
the failure scenarios: a reassignment whose new replica's broker is killed mid-way, one through
a controller failover, a throttled one under acks=all load, and a deletion held by an offline
replica.

A 3-broker cluster has no spare broker, so a move brings a real new replica this way, as
Kafka's tests shrink and grow a replica set: partition 0 first drops an in-sync follower (its
replica is stopped and deleted), then takes it back first in the list, as a new, empty replica
that copies the whole log from the leader outside the ISR and joins it by the expand rule. The
replica set ends as it began, so the checker's view of the replicas stays true.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from minibroker.client import controller_admin, reassignment_throttles
from minibroker.client.admin_zk import create_topic
from minibroker.client.topic_changes_zk import mark_for_deletion
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import TopicZNode
from minibroker.scenarios.context import ScenarioContext, ScenarioStepFailed
from minibroker.scenarios.scenario import Scenario

# The new replica falls behind at this rate: partition 0 takes ~1.5 kB/s of the workload.
SLOW_BYTES_PER_S = 500
# A follower fetches at most this much of a partition at once: Kafka's quota counts a fetch's
# bytes after the read, so the first fetch of a throttled replica always goes through, and the
# first ~50 records (~5 kB) must not fit in it.
SETTINGS = ("replica.fetch.max.bytes=1024",)


def _reassigning(ctx: ScenarioContext, partition: int) -> tuple[int, ...] | None:
    """The partition's adding replicas while a move is in flight, else None."""
    got = ctx.zk().get_or_none(TopicZNode.path(ctx.topic))
    if got is None:
        return None
    assignment = TopicZNode.decode(ctx.topic, got[0])
    adding = assignment.adding_replicas.get(partition)
    removing = assignment.removing_replicas.get(partition)
    return tuple(adding or ()) if (adding or removing) else None


def _replicas(ctx: ScenarioContext, partition: int) -> tuple[int, ...]:
    got = ctx.zk().get_or_none(TopicZNode.path(ctx.topic))
    assert got is not None
    return TopicZNode.decode(ctx.topic, got[0]).partitions[partition]


def reassign(ctx: ScenarioContext, partition: int, target: Sequence[int], why: str) -> None:
    """AlterPartitionReassignments to the active controller (what a Kafka client's admin call
    becomes), recorded in the timeline."""
    tp = TopicPartition(ctx.topic, partition)
    ctx.timeline.fault("reassign", f"{tp}", f"reassign {tp} to {list(target)} ({why})")
    top, message, results = asyncio.run(
        controller_admin.alter_partition_reassignments(ctx.zk(), {tp: list(target)})
    )
    outcome = results.get(tp)
    if top is not ErrorCode.NONE or outcome is None or outcome.error is not ErrorCode.NONE:
        detail = outcome.error.name if outcome is not None else f"{top.name} {message}"
        raise ScenarioStepFailed(f"the reassignment of {tp} was refused: {detail}")


def wait_moved(ctx: ScenarioContext, partition: int, target: Sequence[int]) -> None:
    """Until the move is done: RS = target in ZooKeeper, nothing adding or removing, and every
    target replica in the ISR; the checker's replica set follows (same brokers, new order)."""
    ctx.wait(
        lambda: (
            _reassigning(ctx, partition) is None
            and _replicas(ctx, partition) == tuple(target)
            and (s := ctx.state(partition)) is not None
            and set(target) <= set(s.isr)
        ),
        f"{ctx.topic}-{partition} moved to {list(target)} with every replica in the ISR",
        timeout_s=3 * ctx.timing.wait_s,
    )
    ctx.workload.history.assignment[partition] = tuple(target)


def throttle(ctx: ScenarioContext, bytes_per_s: int, partition: int, moving: int) -> None:
    """Throttle the move that adds `moving` to the partition's replicas as
    `kafka-reassign-partitions --throttle` does: the current replicas on the leader side, the
    new one on the follower side, the rate on every broker taking part (only those replicas
    count against the quota)."""
    tp = TopicPartition(ctx.topic, partition)
    current = _replicas(ctx, partition)
    lists = reassignment_throttles.set_throttles(
        ctx.zk(), {tp: current}, {tp: (moving, *current)}, bytes_per_s
    )
    leader, follower = lists[ctx.topic]
    ctx.timeline.fault(
        "throttle", ctx.topic,
        f"replication throttle {bytes_per_s} B/s: leader replicas {leader}, "
        f"follower replicas {follower}",
    )  # fmt: skip


def lift_throttle(ctx: ScenarioContext) -> None:
    """As `--verify` does once the move is done: every throttle of the topic and the brokers."""
    brokers = {b for replicas in ctx.workload.history.assignment.values() for b in replicas}
    reassignment_throttles.clear_throttles(ctx.zk(), [ctx.topic], sorted(brokers))
    ctx.timeline.fault("throttle", ctx.topic, "replication throttle lifted")


def _drop_and_readd(ctx: ScenarioContext, partition: int = 0) -> tuple[int, list[int]]:
    """Drop an in-sync follower from the partition's replicas, then add it back first (a new,
    empty replica), throttled so that the move stays in flight; (the follower, the target)."""
    name = ctx.follower(partition)
    victim = ctx.node_id(name)
    rest = [b for b in ctx.workload.history.assignment[partition] if b != victim]
    reassign(ctx, partition, rest, f"drop follower {victim}: its replica is deleted")
    wait_moved(ctx, partition, rest)
    throttle(ctx, SLOW_BYTES_PER_S, partition, victim)
    target = [victim, *rest]
    reassign(ctx, partition, target, f"add {victim} back: a new replica outside the ISR")
    ctx.wait(lambda: _reassigning(ctx, partition) == (victim,), "the move in flight")
    return victim, target


def new_replica_killed(ctx: ScenarioContext) -> None:
    """ControllerIntegrationTest.testPartitionReassignmentWithOfflineReplicaHaltingProgress and
    ...ResumesAfterReplicaComesOnline, under acks=all load."""
    victim, target = _drop_and_readd(ctx)
    ctx.hold(
        lambda: (s := ctx.state(0)) is not None and victim not in s.isr,
        2.0,
        f"the throttled new replica {victim} stays outside the ISR",
    )
    ctx.act("kill", ctx.broker_name(victim), "the new replica's broker, mid-way")
    ctx.wait_unregistered(victim)
    ctx.wait_acks(more=40, partitions=[0])  # the old replicas keep acknowledging
    ctx.expect(_reassigning(ctx, 0) == (victim,), "the move waits for the dead new replica")
    lift_throttle(ctx)
    ctx.act("start", ctx.broker_name(victim), "the new replica's broker returns")
    wait_moved(ctx, 0, target)


def controller_failover(ctx: ScenarioContext) -> None:
    """ControllerIntegrationTest.testControllerMoveOnPartitionReassignment: the active
    controller dies mid-move; the new one resumes it from ZooKeeper."""
    _victim, target = _drop_and_readd(ctx)
    old = ctx.recorder.controller_id()
    ctx.act("kill", ctx.controller(), "the active controller, mid-move")
    ctx.wait_controller_other_than(old if old is not None else -1)
    lift_throttle(ctx)
    wait_moved(ctx, 0, target)


def throttled_under_load(ctx: ScenarioContext) -> None:
    """ReplicationQuotasTest / throttling_test.py: while the quota holds the new replica back,
    it stays outside the ISR and acks=all writes go on; lifted, it catches up and joins."""
    victim, target = _drop_and_readd(ctx)
    ctx.hold(
        lambda: (s := ctx.state(0)) is not None and victim not in s.isr,
        3.0,
        f"the throttled new replica {victim} stays outside the ISR",
    )
    ctx.wait_acks(more=60, partitions=[0])
    lift_throttle(ctx)
    wait_moved(ctx, 0, target)


def deletion_with_offline_replica(ctx: ScenarioContext) -> None:
    """DeleteTopicTest.testResumeDeleteTopicWithRecoveredFollower, beside a topic under load:
    a second topic's deletion waits for a dead replica's broker and finishes once it is back;
    the workload's topic is untouched throughout."""
    zk = ctx.zk()
    doomed = f"{ctx.topic}-doomed"
    create_topic(zk, doomed, 3, 3, {}, random.Random(ctx.rng.random()))
    ctx.wait(
        lambda: all(zk.read_partition_state(TopicPartition(doomed, p)) for p in range(3)),
        f"{doomed}'s partitions led",
    )
    name = ctx.follower(0)
    victim = ctx.node_id(name)
    ctx.act("kill", name, f"holds a replica of {doomed}")
    ctx.wait_unregistered(victim)
    mark_for_deletion(zk, doomed)
    ctx.timeline.fault("delete", doomed, f"delete topic {doomed}")
    ctx.hold(
        lambda: zk.exists(TopicZNode.path(doomed)) is not None,
        2.0,
        f"{doomed} waits for broker {victim}",
    )
    ctx.wait_acks(more=40)
    ctx.act("start", name, f"broker {victim} returns")
    ctx.wait(lambda: zk.exists(TopicZNode.path(doomed)) is None, f"{doomed} deleted")


SCENARIOS = [
    Scenario(
        "reassign-new-replica-killed",
        "a partition's new replica (throttled, outside the ISR) loses its broker mid-move; the "
        "move waits and finishes when the broker returns",
        new_replica_killed,
        cluster_settings=SETTINGS,
    ),
    Scenario(
        "reassign-controller-failover",
        "the active controller is killed while a partition is being moved; the standby resumes "
        "the move from ZooKeeper",
        controller_failover,
        cluster_settings=SETTINGS,
    ),
    Scenario(
        "reassign-throttled-under-load",
        "a throttled move under acks=all load: the new replica stays outside the ISR while the "
        "quota holds it back, then catches up and joins",
        throttled_under_load,
        cluster_settings=SETTINGS,
    ),
    Scenario(
        "delete-with-offline-replica",
        "a second topic is deleted while a broker holding a replica of it is down; the deletion "
        "waits and finishes when the broker returns",
        deletion_with_offline_replica,
    ),
]
