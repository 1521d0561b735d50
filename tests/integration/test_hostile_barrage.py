"""The live barrage (issue 15 part 2): over 10,000 hostile requests, from one seed, to every gRPC
method of the leader, a follower and the active controller of a real cluster. Each must get a
defined answer — Kafka's error code, INVALID_ARGUMENT, RESOURCE_EXHAUSTED for what exceeds the
gRPC receive limit, UNIMPLEMENTED for a broker's request sent to the controller — never
UNKNOWN/INTERNAL, a hang or a crash; afterwards no process died,
no ISR, leader epoch, log end offset or high watermark moved, no byte was written, no handler
failed, and every acknowledged record reads back identical.

Rerun one seed: MINIBROKER_BARRAGE_SEED=N pytest tests/integration/test_hostile_barrage.py
"""

from __future__ import annotations

import asyncio
import os
import random
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf.message import Message

from minibroker import localcluster
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import BrokerIdZNode
from tests.hostile import barrage
from tests.integration.conftest import Cluster, describe_partition, segment_bytes, settled
from tests.integration.rpc import batch, produce

pytestmark = pytest.mark.integration

TP = TopicPartition("t", 0)
REQUESTS = 10_000
IN_FLIGHT = 32
DEADLINE_S = 40.0  # above the broker's 30 s fetch wait cap: a timeout here is a hang
SEED = int(os.environ.get("MINIBROKER_BARRAGE_SEED", random.randrange(1 << 30)))
DEFINED = {grpc.StatusCode.OK, grpc.StatusCode.INVALID_ARGUMENT}


def authority(c: Cluster, leader_epoch: int) -> barrage.Authority:
    controller_epoch = int(c.zk.get("/controller_epoch")[0] or b"0")
    epochs = {}
    for b in (1, 2, 3):
        _, stat = c.zk.get(BrokerIdZNode.path(b))
        epochs[b] = int(stat.czxid)
    return barrage.Authority(controller_epoch, epochs, leader_epoch)


def error_codes(msg: Message) -> Iterator[int]:
    """Every `error_code` anywhere in a response."""
    for field, value in msg.ListFields():
        if field.name == "error_code":
            yield int(value)
        elif field.message_type is not None:
            subs = value.values() if hasattr(value, "values") else value
            for sub in subs if field.is_repeated else [value]:
                if isinstance(sub, Message):
                    yield from error_codes(sub)


def verdict(shot: barrage.Shot, status: grpc.StatusCode, response: bytes | None) -> str | None:
    """Why this answer is not a defined one, or None."""
    allowed = DEFINED | ({grpc.StatusCode.RESOURCE_EXHAUSTED} if shot.kind == "big" else set())
    if shot.target == "controller" and shot.method in barrage.CONTROL_METHODS[:3]:
        allowed = allowed | {grpc.StatusCode.UNIMPLEMENTED}  # requests for brokers
    if status not in allowed:
        return f"status {status.name}"
    if status is not grpc.StatusCode.OK or response is None or shot.method.response is None:
        return None
    parsed = shot.method.response.FromString(response)
    for code in error_codes(parsed):
        if code not in ErrorCode._value2member_map_ or code == ErrorCode.UNKNOWN_SERVER_ERROR:
            return f"error code {code}"
    if shot.method is barrage.BROKER_METHODS[0]:  # Produce: nothing may be appended
        assert isinstance(parsed, type(shot.method.response()))
        for t in parsed.responses:  # type: ignore[attr-defined]
            for p in t.partitions:
                if t.name == TP.topic and p.error_code == ErrorCode.NONE:
                    return "a hostile produce was appended"
    return None


async def fire(
    channels: dict[str, grpc.aio.Channel], shot: barrage.Shot
) -> tuple[grpc.StatusCode, bytes | None]:
    channel = channels[shot.target]
    try:
        if shot.method.streaming:
            call = channel.unary_stream(shot.method.path)(shot.payload, timeout=DEADLINE_S)
            async for _ in call:
                pass
            return grpc.StatusCode.OK, None
        response = await channel.unary_unary(shot.method.path)(shot.payload, timeout=DEADLINE_S)
        return grpc.StatusCode.OK, response
    except grpc.aio.AioRpcError as exc:
        return exc.code(), None


async def run_barrage(addresses: dict[str, str], shots: list[barrage.Shot]) -> list[str]:
    options = [("grpc.max_send_message_length", 128 << 20)]
    channels = {k: grpc.aio.insecure_channel(a, options=options) for k, a in addresses.items()}
    gate = asyncio.Semaphore(IN_FLIGHT)
    failures: list[str] = []
    seen: Counter[str] = Counter()

    async def one(i: int, shot: barrage.Shot) -> None:
        async with gate:
            status, response = await fire(channels, shot)
        seen[status.name] += 1
        why = verdict(shot, status, response)
        if why is not None:
            name = shot.method.path.rsplit("/", 1)[1]
            failures.append(f"#{i} {shot.kind} {name} -> {shot.target}: {why}")

    try:
        await asyncio.gather(*(one(i, s) for i, s in enumerate(shots)))
    finally:
        await asyncio.gather(*(ch.close() for ch in channels.values()))
    print(f"barrage seed {SEED}: {len(shots)} requests, statuses {dict(seen)}")
    return failures


def test_a_barrage_of_hostile_requests_moves_nothing(topic_t: Cluster) -> None:
    c = topic_t
    first = describe_partition(c)
    leader = first["leader"]
    follower = next(b for b in first["isr"] if b != leader)
    leader_address = c.state.process(f"broker-{leader}").address
    acked = []
    for i in range(20):
        r = produce(leader_address, TP, batch(b"acked-%d" % i))
        assert r.error is ErrorCode.NONE, r
        acked.append(b"acked-%d" % i)
    before = settled(c, len(acked))  # every replica caught up, and knows it
    logs_before = segment_bytes(c)
    active = str(c.status()["controller"]["name"])
    addresses = {
        "leader": leader_address,
        "follower": c.state.process(f"broker-{follower}").address,
        "controller": c.state.process(active).address,
    }
    auth = authority(c, before["leader_epoch"])
    shots = [*barrage.shots(SEED, REQUESTS, auth), *barrage.big_shots(auth)]
    assert len({s.method.path for s in shots}) == 11  # every method we serve

    failures = asyncio.run(run_barrage(addresses, shots))

    rerun = f"(rerun: MINIBROKER_BARRAGE_SEED={SEED})"
    assert not failures, f"{len(failures)} undefined answers {rerun}:\n" + "\n".join(failures[:30])
    dead = [p.name for p in c.reload().processes if not localcluster.is_alive(p)]
    assert not dead, f"processes died: {dead} {rerun}"
    after = describe_partition(c)
    for key in ("leader", "leader_epoch", "isr", "replicas_state"):
        assert after[key] == before[key], f"{key} moved {rerun}"
    assert segment_bytes(c) == logs_before, f"a byte was written {rerun}"
    for name in ("broker-1", "broker-2", "broker-3", active):
        failed = [e for e in c.log_events(name) if e.get("event") == "request_failed"]
        assert not failed, f"{name}: {failed[:3]} {rerun}"
    consumed = c.cli("consume", "t", "--from-beginning", "--until-hw", "--timeout-ms", "20000")
    assert consumed.stdout.split() == [v.decode() for v in acked]
