"""The live barrage's requests (issue 15 part 2), from one seed: random bytes, broken protobuf,
absurd field values, the hostile batches, payloads of tens of MB, forged follower fetches and
stale controller/broker epochs, for every gRPC method a broker or controller serves.

Every request is one the protocol promises to refuse. Some requests that parse would be obeyed
by Kafka too (a LeaderAndIsr with a newer controller epoch and no broker epoch; a fetch from a
real follower's id at the leader's epoch; a controlled shutdown of a live broker without its
epoch): the generator leaves those out — they are authority, not hostility, and this project,
like ZooKeeper-era Kafka, has no authentication to tell them apart.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from google.protobuf import descriptor as pbd
from google.protobuf.message import DecodeError, Message

from minibroker.rpc import broker_pb2, control_pb2, events_pb2
from tests.hostile import batches as hb

INT_EDGES = [0, -1, 1, 2, 3, 7, 99, 2**31 - 1, -(2**31), 2**15, -100]
LONG_EDGES = [*INT_EDGES, 2**63 - 1, -(2**63), 2**40]
TOPIC = "t"


@dataclass(frozen=True)
class Method:
    path: str
    request: type[Message]
    response: type[Message] | None  # None: a stream or a service not ours
    streaming: bool = False


BROKER_METHODS = [
    Method(f"/minibroker.v1.Broker/{n}", getattr(broker_pb2, f"{n}Request"),
           getattr(broker_pb2, f"{n}Response"))
    for n in ("Produce", "Fetch", "ListOffsets", "Metadata", "OffsetsForLeaderEpoch",
              "DescribeBroker")
]  # fmt: skip
CONTROL_METHODS = [
    Method(f"/minibroker.v1.Control/{n}", getattr(control_pb2, f"{n}Request"),
           getattr(control_pb2, f"{n}Response"))
    for n in ("LeaderAndIsr", "UpdateMetadata", "StopReplica", "ControlledShutdown")
]  # fmt: skip
EVENTS = Method(
    "/minibroker.v1.Events/Stream", events_pb2.StreamEventsRequest, None, streaming=True
)


@dataclass(frozen=True)
class Authority:
    """What a request must not carry to be refused: the cluster's current epochs."""

    controller_epoch: int
    broker_epochs: dict[int, int]  # broker id -> epoch (czxid)
    leader_epoch: int


@dataclass(frozen=True)
class Shot:
    target: str  # "leader", "follower" or "controller"
    method: Method
    payload: bytes
    kind: str


def _fill(msg: Message, rng: random.Random, depth: int = 0) -> None:
    """Absurd values in every field of `msg` (recursively, a few elements per list)."""
    for f in msg.DESCRIPTOR.fields:
        if rng.random() < 0.25:
            continue
        n = rng.randint(0, 3) if f.is_repeated else 1
        for _ in range(n):
            if f.type == pbd.FieldDescriptor.TYPE_MESSAGE:
                if depth >= 3:
                    break
                sub = getattr(msg, f.name).add() if f.is_repeated else getattr(msg, f.name)
                _fill(sub, rng, depth + 1)
                if not f.is_repeated:
                    sub.SetInParent()
                continue
            value = _scalar(f, rng)
            if f.is_repeated:
                getattr(msg, f.name).append(value)
            else:
                setattr(msg, f.name, value)


def _scalar(f: Any, rng: random.Random) -> Any:
    t = f.type
    if t == pbd.FieldDescriptor.TYPE_STRING:
        return rng.choice(["", TOPIC, "no-such-topic", "é" * 300, "../..", "t\x00", "a" * 250])
    if t == pbd.FieldDescriptor.TYPE_BYTES:
        return rng.choice([b"", rng.randbytes(rng.randint(0, 200)), hb.good(2)[:-5]])
    if t == pbd.FieldDescriptor.TYPE_BOOL:
        return rng.random() < 0.5
    if t == pbd.FieldDescriptor.TYPE_ENUM:
        return rng.choice([v.number for v in f.enum_type.values])
    if t in (pbd.FieldDescriptor.TYPE_INT64, pbd.FieldDescriptor.TYPE_SINT64):
        return rng.choice(LONG_EDGES)
    return rng.choice(INT_EDGES)


def obeyable(method: Method, payload: bytes, auth: Authority) -> bool:
    """Would a broker or controller rightly obey this request (see the module docstring)?"""
    try:
        msg: Any = method.request.FromString(payload)
    except DecodeError:
        return False
    name = method.path.rsplit("/", 1)[1]
    if name == "Produce":  # a valid batch to a real topic would be appended: none is generated
        return False
    if name == "Fetch":
        follower = msg.HasField("replica_id") and msg.replica_id in auth.broker_epochs
        return follower and any(
            not p.HasField("current_leader_epoch")
            or p.current_leader_epoch in (-1, auth.leader_epoch)
            for t in msg.topics
            for p in t.partitions
        )
    if name == "ControlledShutdown":
        epoch = msg.broker_epoch if msg.HasField("broker_epoch") else -1
        return msg.broker_id in auth.broker_epochs and (
            epoch == -1 or epoch >= auth.broker_epochs[msg.broker_id]
        )
    if method in CONTROL_METHODS:
        epoch = msg.broker_epoch if msg.HasField("broker_epoch") else -1
        newest = max(auth.broker_epochs.values())
        return msg.controller_epoch >= auth.controller_epoch and (epoch == -1 or epoch >= newest)
    return False


def _hostile_produce(rng: random.Random) -> bytes:
    variant = rng.choice(hb.VARIANTS)
    req = broker_pb2.ProduceRequest(acks=rng.choice([-1, 1, 0, 5, -7]), timeout_ms=2000)
    req.topics.add(name=TOPIC).partitions.add(partition_index=0, records=variant.make())
    return req.SerializeToString()


def _forged_fetch(rng: random.Random, auth: Authority) -> bytes:
    req = broker_pb2.FetchRequest(max_wait_ms=rng.choice([0, 50]), min_bytes=1, max_bytes=1 << 20)
    real = sorted(auth.broker_epochs)
    if rng.random() < 0.5:
        req.replica_id = rng.choice([99, 1000, -5, 0, 2**31 - 1])  # not a replica
        epoch = auth.leader_epoch
    else:
        req.replica_id = rng.choice(real)
        epoch = auth.leader_epoch - rng.randint(1, 3)  # stale: fenced
    p = req.topics.add(topic=TOPIC).partitions.add(
        partition=0, fetch_offset=rng.choice([0, 5, 2**40, -3]), partition_max_bytes=1 << 20
    )
    p.current_leader_epoch = epoch
    return req.SerializeToString()


def _stale_control(method: Method, rng: random.Random, auth: Authority) -> bytes:
    msg: Any = method.request()
    _fill(msg, rng)
    name = method.path.rsplit("/", 1)[1]
    if name == "ControlledShutdown":
        msg.broker_id = rng.choice(sorted(auth.broker_epochs))
        msg.broker_epoch = auth.broker_epochs[msg.broker_id] - rng.randint(1, 1000)
    elif rng.random() < 0.5:
        msg.controller_epoch = auth.controller_epoch - rng.randint(1, 5)
    else:
        msg.controller_epoch = auth.controller_epoch
        msg.broker_epoch = min(auth.broker_epochs.values()) - rng.randint(1, 1000)
    out: bytes = msg.SerializeToString()
    return out


def shots(seed: int, count: int, auth: Authority) -> Iterator[Shot]:
    """`count` requests, the same ones for the same seed and cluster state."""
    rng = random.Random(seed)
    on_brokers = [*BROKER_METHODS, *CONTROL_METHODS, EVENTS]
    on_controller = [*CONTROL_METHODS, EVENTS]
    made = 0
    while made < count:
        target = rng.choice(["leader", "leader", "follower", "controller"])
        method = rng.choice(on_controller if target == "controller" else on_brokers)
        kind = rng.choice(["random", "broken", "absurd", "special"])
        if kind == "random":
            payload = rng.randbytes(rng.randint(0, 300))
        elif kind == "broken":
            msg = method.request()
            _fill(msg, rng)
            good = bytearray(msg.SerializeToString())
            if good and rng.random() < 0.5:
                good[rng.randrange(len(good))] ^= 1 << rng.randrange(8)
            payload = bytes(good[: rng.randint(0, len(good))]) if good else b"\xff"
        elif kind == "absurd":
            msg = method.request()
            _fill(msg, rng)
            payload = msg.SerializeToString()
        else:
            name = method.path.rsplit("/", 1)[1]
            if name == "Produce":
                payload = _hostile_produce(rng)
            elif name == "Fetch":
                payload = _forged_fetch(rng, auth)
            elif method in CONTROL_METHODS:
                payload = _stale_control(method, rng, auth)
            else:
                msg = method.request()
                _fill(msg, rng)
                payload = msg.SerializeToString()
        if method.streaming and _follows(payload):
            continue  # a follow stream never ends by itself: not a barrage shot
        if obeyable(method, payload, auth):
            continue
        made += 1
        yield Shot(target, method, payload, kind)


def _follows(payload: bytes) -> bool:
    try:
        return events_pb2.StreamEventsRequest.FromString(payload).follow
    except DecodeError:
        return False


def big_shots(auth: Authority) -> list[Shot]:
    """Payloads of tens of MB: a 20 MB batch (over message.max.bytes) and a 70 MB request
    (over the broker's 64 MiB gRPC limit), and 5 MB to the controller (over its 4 MiB)."""
    produce = BROKER_METHODS[0]
    big = hb.batch(hb.records(1) + b"\x00" * (20 << 20), record_count=1)
    req = broker_pb2.ProduceRequest(acks=-1, timeout_ms=2000)
    req.topics.add(name=TOPIC).partitions.add(partition_index=0, records=big)
    huge = broker_pb2.ProduceRequest(acks=-1, timeout_ms=2000)
    huge.topics.add(name=TOPIC).partitions.add(partition_index=0, records=b"\x00" * (70 << 20))
    over_4_mib = bytes(5 << 20)
    return [
        Shot("leader", produce, req.SerializeToString(), "big"),
        Shot("follower", produce, req.SerializeToString(), "big"),
        Shot("leader", produce, huge.SerializeToString(), "big"),
        Shot("controller", CONTROL_METHODS[3], over_4_mib, "big"),
    ]
