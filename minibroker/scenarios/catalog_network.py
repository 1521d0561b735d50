"""Network faults through the fault proxy (`needs_proxy`; reference §8.2, §8.4 items 7, 9): a
broker cut off from the other brokers, from ZooKeeper (clients still reach it) or from
everything, and latency or throttled bandwidth on every broker link."""

from __future__ import annotations

from minibroker.chaos import NetworkFault
from minibroker.scenarios.context import ScenarioContext
from minibroker.scenarios.scenario import Scenario

DELAY_MS = 40
THROTTLE_BYTES_PER_S = 16 * 1024
# How long latency and throttling stay on while records flow (seconds of observation).
SLOW_FOR_ACKS = 200


def _out_of_isr(ctx: ScenarioContext, node_id: int) -> None:
    ctx.wait(
        lambda: (s := ctx.state(0)) is not None and node_id not in s.isr,
        f"broker {node_id} out of the ISR of {ctx.topic}-0",
    )


def isolate_follower(ctx: ScenarioContext) -> None:
    """Cut an in-sync follower of partition 0 off from the other brokers (ZooKeeper and the
    controllers still reach it): its leader drops it from the ISR after the lag; healed, it
    catches up and rejoins."""
    name = ctx.follower()
    node_id = ctx.node_id(name)
    ctx.network_fault(NetworkFault("cut", name, peers=("brokers",)), f"follower of {ctx.topic}-0")
    _out_of_isr(ctx, node_id)
    ctx.wait_acks(more=30, partitions=[0])
    ctx.heal(name)
    ctx.wait_in_isr(node_id)
    ctx.wait_acks(more=30)


def session_expiry(ctx: ScenarioContext) -> None:
    """Expire an in-sync follower's ZooKeeper session by cutting it from ZooKeeper for longer
    than the session timeout: its registration goes, the controller drops it from every ISR;
    healed, it registers again (a new broker epoch) and rejoins."""
    name = ctx.follower()
    node_id = ctx.node_id(name)
    ctx.network_fault(NetworkFault("cut", name, peers=("zookeeper",)), "its ZooKeeper link")
    ctx.wait_unregistered(node_id)
    _out_of_isr(ctx, node_id)
    ctx.heal(name)
    ctx.wait_registered(node_id)
    ctx.wait_in_isr(node_id)
    ctx.wait_acks(more=30)


def isolate_leader(ctx: ScenarioContext, from_zookeeper_only: bool) -> None:
    """Cut partition 0's leader from ZooKeeper only (clients and followers still reach it) or
    from everything. Its session expires and the controller elects another leader; the old
    one cannot complete acks=all writes any more (its ISR write fails, its followers moved
    on), so nothing it accepts meanwhile may be acknowledged. Healed, it becomes a follower,
    truncates what it alone had, and rejoins."""
    name = ctx.leader()
    old = ctx.node_id(name)
    peers = ("zookeeper",) if from_zookeeper_only else ("all",)
    ctx.network_fault(NetworkFault("cut", name, peers=peers), f"leader of {ctx.topic}-0")
    ctx.wait_new_leader(0, old)
    ctx.wait_acks(more=60, partitions=[0])
    ctx.heal(name)
    ctx.wait_registered(old)
    ctx.wait_in_isr(old)
    ctx.wait_acks(more=30)


def slow_links(ctx: ScenarioContext, throttle: bool) -> None:
    """Every broker's links slowed (DELAY_MS latency, or THROTTLE_BYTES_PER_S) while records
    flow: producers retry and wait, nothing acked is lost; then healed."""
    brokers = [n.name for n in ctx.chaos.nodes() if n.role == "broker"]
    try:
        for name in brokers:
            fault = (
                NetworkFault("throttle", name, bytes_per_s=THROTTLE_BYTES_PER_S)
                if throttle
                else NetworkFault("delay", name, delay_ms=DELAY_MS)
            )
            ctx.network_fault(fault)
        ctx.wait_acks(more=SLOW_FOR_ACKS)
    finally:
        for name in brokers:
            if name in ctx.network_faulted:
                ctx.heal(name)
    ctx.wait_acks(more=30)


SCENARIOS = [
    Scenario(
        "zk-session-expiry",
        "cut an in-sync follower from ZooKeeper past the session timeout: it is dropped from "
        "every ISR, re-registers when healed and rejoins",
        session_expiry,
        needs_proxy=True,
    ),
    Scenario(
        "isolate-follower",
        "cut an in-sync follower off from the other brokers: ISR shrink after the lag, rejoin "
        "after healing",
        isolate_follower,
        needs_proxy=True,
    ),
    Scenario(
        "isolate-leader-from-zookeeper",
        "cut the leader from ZooKeeper only: a new leader is elected while clients still reach "
        "the old one, which must not acknowledge anything",
        lambda ctx: isolate_leader(ctx, from_zookeeper_only=True),
        needs_proxy=True,
    ),
    Scenario(
        "isolate-leader",
        "cut the leader off from everything: a new leader is elected; healed, the old one "
        "truncates and rejoins",
        lambda ctx: isolate_leader(ctx, from_zookeeper_only=False),
        needs_proxy=True,
    ),
    Scenario(
        "latency",
        f"{DELAY_MS} ms added to every broker link under load; nothing acked is lost",
        lambda ctx: slow_links(ctx, throttle=False),
        needs_proxy=True,
    ),
    Scenario(
        "throttle",
        f"every broker link throttled to {THROTTLE_BYTES_PER_S // 1024} KiB/s under load; "
        "nothing acked is lost",
        lambda ctx: slow_links(ctx, throttle=True),
        needs_proxy=True,
    ),
]
