"""Scenarios about the rules themselves (reference §8.4 items 11, 13): every ISR member dead with
unclean election off (the partition waits) and on (documented loss, logs converge), and
min.insync.replicas violated before the append (error 19) and while waiting (error 20)."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from functools import partial

from minibroker.client.probe import fetch_once, produce_once
from minibroker.client.requests import PartitionResult
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import now_ms
from minibroker.scenarios.context import ScenarioContext, ScenarioStepFailed
from minibroker.scenarios.scenario import Scenario


def _offline(ctx: ScenarioContext) -> bool:
    s = ctx.state(0)
    return s is not None and s.leader < 0


def all_isr_dead(ctx: ScenarioContext, unclean: bool) -> None:
    """Kafka's truncation test (reference §8.3): take an in-sync follower of partition 0 out
    (SIGKILL; its session expires and the controller drops it from the ISR) and keep producing,
    so it misses acked records; kill every remaining ISR member; start the stale replica first.
    Unclean off: the partition stays offline until an ISR member returns. On: the stale replica
    becomes leader at once, and the records it missed are gone."""
    stale_name = ctx.follower()
    stale = ctx.node_id(stale_name)
    ctx.act("kill", stale_name, f"in-sync follower of {ctx.topic}-0, to become stale")
    ctx.wait_unregistered(stale)
    ctx.wait(
        lambda: (s := ctx.state(0)) is not None and stale not in s.isr,
        f"broker {stale} out of the ISR of {ctx.topic}-0",
    )
    ctx.wait_acks(more=60, partitions=[0])
    state = ctx.state(0)
    assert state is not None
    isr = [b for b in state.isr if b != stale]
    for b in isr:
        ctx.act("kill", ctx.broker_name(b), f"ISR member of {ctx.topic}-0")
    for b in isr:
        ctx.wait_unregistered(b)
    ctx.wait(lambda: _offline(ctx), f"{ctx.topic}-0 without a leader")
    last = ctx.state(0)
    assert last is not None
    ctx.act("start", stale_name, "the out-of-sync replica comes back first")
    ctx.wait_registered(stale)
    if unclean:
        leader = ctx.wait_new_leader(0, -1)
        ctx.expect(
            leader == stale,
            "the out-of-sync replica is elected (unclean)",
            f"leader {leader}, stale replica {stale}",
        )
        # Reference §4.9: the new leader takes writes past where the old ISR's logs ended
        # before those replicas return, so only truncation by leader epoch can reconcile them.
        old_end = max(_log_end(ctx, b) for b in isr)
        ctx.wait(
            lambda: _log_end(ctx, stale) > old_end,
            f"the unclean leader's log past offset {old_end}, where the old ISR's ended",
        )
        for b in isr:
            ctx.act("start", ctx.broker_name(b), "old ISR member returns and truncates")
    else:
        seconds = 2 * ctx.timing.session_timeout_ms / 1000
        ctx.hold(lambda: _offline(ctx), seconds, f"{ctx.topic}-0 stays offline (unclean off)")
        member = last.isr[0]
        ctx.act("start", ctx.broker_name(member), f"ISR member {list(last.isr)} returns")
        leader = ctx.wait_new_leader(0, -1)
        ctx.expect(
            leader in last.isr,
            "an ISR member is elected",
            f"leader {leader}, last ISR {list(last.isr)}",
        )
        for b in isr:
            if b != member:
                ctx.act("start", ctx.broker_name(b))
    for b in [stale, *isr]:
        ctx.wait_in_isr(b)
    ctx.wait_acks(more=30)


def _batch(ctx: ScenarioContext, label: str) -> tuple[bytes, str]:
    value = f"{ctx.workload.traffic.tag}-{label}"
    return build_batch([NewRecord(None, value.encode())], base_timestamp=now_ms()), value


def _produce(ctx: ScenarioContext, leader: int, batch: bytes) -> Future[PartitionResult]:
    address = ctx.workload.brokers[leader]
    tp = TopicPartition(ctx.topic, 0)
    coro = produce_once(ctx.workload.channels, address, tp, batch, acks=-1, timeout_ms=10_000)
    return asyncio.run_coroutine_threadsafe(coro, ctx.workload.loop)


def _log_end(ctx: ScenarioContext, broker: int) -> int:
    """Partition 0's log end offset on `broker`, as it last described it."""
    sample = ctx.workload.last_samples().get((broker, 0))
    if sample is None:
        raise ScenarioStepFailed(f"no description of {ctx.topic}-0 from broker {broker} yet")
    return sample.log_end_offset


def min_insync(ctx: ScenarioContext) -> None:
    """Partition 0 (RF 3, min.insync.replicas 2). 1. Kill both followers; once the ISR is the
    leader alone, an acks=all Produce is refused with NOT_ENOUGH_REPLICAS (19) and the leader's
    log does not grow. 2. Start them, wait for a full ISR, SIGSTOP both and produce at once: the
    leader appends, then shrinks the ISR to itself after the lag and answers
    NOT_ENOUGH_REPLICAS_AFTER_APPEND (20) — and the record is in the log."""
    state = ctx.state(0)
    if state is None:
        raise ScenarioStepFailed("no state for partition 0")
    leader = state.leader
    followers = [b for b in state.isr if b != leader]
    for b in followers:
        ctx.act("kill", ctx.broker_name(b), f"follower of {ctx.topic}-0")
    for b in followers:
        ctx.wait_unregistered(b)
    ctx.wait(
        lambda: (s := ctx.state(0)) is not None and s.isr == (leader,),
        f"the ISR of {ctx.topic}-0 down to [{leader}]",
    )
    ctx.wait(lambda: ctx.workload.last_samples().get((leader, 0)) is not None, "a sample")
    ctx.wait(
        lambda: ctx.workload.last_samples()[(leader, 0)].isr == (leader,),
        f"leader {leader} to know its ISR is [{leader}]",
    )
    before = _log_end(ctx, leader)
    batch, value = _batch(ctx, "min-insync-19")
    result = _produce(ctx, leader, batch).result(30)
    ctx.timeline.note(f"raw acks=all Produce to broker {leader}: {result.error.name}")
    ctx.expect(
        result.error is ErrorCode.NOT_ENOUGH_REPLICAS,
        "acks=all with ISR below min.insync.replicas: NOT_ENOUGH_REPLICAS (19)",
        f"answered {result.error.name} ({int(result.error)})",
    )
    after = ctx.wait(lambda: ctx.workload.last_samples().get((leader, 0)), "a fresh sample")
    ctx.expect(
        after.log_end_offset == before,
        "nothing appended on NOT_ENOUGH_REPLICAS",
        f"log end offset {before} -> {after.log_end_offset}",
    )

    for b in followers:
        ctx.act("start", ctx.broker_name(b))
    for b in followers:
        ctx.wait_in_isr(b)
    ctx.wait_acks(more=20, partitions=[0])
    batch, value = _batch(ctx, "min-insync-20")
    for b in followers:
        ctx.act("pause", ctx.broker_name(b), "followers stop fetching")
    pending = _produce(ctx, leader, batch)
    # Other clients keep writing meanwhile: every append makes the leader re-check its HW.
    ctx.workload.start_concurrent_writer(0)
    try:
        result = pending.result(30)
    finally:
        ctx.workload.stop_concurrent_writer()
        for b in followers:
            ctx.act("resume", ctx.broker_name(b))
    ctx.timeline.note(f"raw acks=all Produce to broker {leader}: {result.error.name}")
    ctx.expect(
        result.error is ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        "ISR shrank below min.insync.replicas while waiting: NOT_ENOUGH_REPLICAS_AFTER_APPEND (20)",
        f"answered {result.error.name} ({int(result.error)})",
    )
    for b in followers:
        ctx.wait_in_isr(b)
    ctx.expect(_value_in_log(ctx, leader, value), "the record answered with 20 is in the log")
    ctx.wait_acks(more=20)


def _value_in_log(ctx: ScenarioContext, leader: int, value: str) -> bool:
    """Whether `value` is in partition 0 on `leader` below its HW."""
    address = ctx.workload.brokers[leader]
    tp = TopicPartition(ctx.topic, 0)
    offset = 0
    hw = 1
    while offset < hw:
        got = ctx.workload.call(fetch_once(ctx.workload.channels, address, tp, offset))
        if got.error is not ErrorCode.NONE or not got.records:
            return False
        hw = got.high_watermark
        if any(r.value == value.encode() for r in got.records):
            return True
        offset = got.records[-1].offset + 1
    return False


SCENARIOS = [
    Scenario(
        "unclean-election-off",
        "kill every ISR member, start a stale replica first: the partition stays offline until "
        "an ISR member returns; no acked record lost",
        partial(all_isr_dead, unclean=False),
    ),
    Scenario(
        "unclean-election-on",
        "as unclean-election-off with unclean.leader.election.enable=true (and min.insync.replicas "
        "1): the stale replica leads at once and takes writes before the old ISR returns; the "
        "acked records it missed are an expected loss; the logs converge",
        partial(all_isr_dead, unclean=True),
        unclean_loss_expected=True,
        topic_config={"min.insync.replicas": "1", "unclean.leader.election.enable": "true"},
    ),
    Scenario(
        "min-insync",
        "min.insync.replicas violated: error 19 with nothing appended, then error 20 (ISR "
        "shrank while waiting) with the record in the log",
        min_insync,
    ),
]
