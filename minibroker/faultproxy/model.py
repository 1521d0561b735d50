"""The fault proxy's vocabulary: links named "<source>-><target>", each direction's fault, the
requests that change them and which links a request selects. Pure: no sockets, no clock; the
proxy process (engine.py) and its clients (client.py) both speak it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any, Literal

HOST = "127.0.0.1"
# The control service's gRPC name (JSON requests; see service.py for its methods).
SERVICE = "minibroker.faultproxy.v1.FaultProxy"
CLIENT = "client"  # the source of every link that tools and client programs use
# The source of the links Kafka clients use to a broker's KAFKA listener (process mode behind
# the proxy): a client too, so "clients" selects both.
KAFKA_CLIENT = "kafka-client"
ZOOKEEPER = "zookeeper"
ALL = "all"
# Peer groups a fault may name instead of nodes, by the kind of node each one holds.
GROUPS: Mapping[str, str] = {
    "brokers": "broker",
    "controllers": "controller",
    "zookeeper": "zookeeper",
    "clients": "client",
}
_NODE = re.compile(r"(broker|controller)-\d+")
# Far beyond any test's patience; larger values are typos (seconds given as ms, bits as bytes).
MAX_DELAY_MS = 600_000
MAX_BANDWIDTH = 10 << 30

# forward: from the link's source (who connects) to its target; backward: the answers.
LinkDirection = Literal["forward", "backward"]
# Relative to the node a request names ("out": what the node sends); without a node, relative
# to each link's source (so "out" is forward).
Direction = Literal["both", "out", "in"]
DIRECTIONS: tuple[Direction, ...] = ("both", "out", "in")


class FaultRequestError(ValueError):
    """A request the proxy cannot carry out; the message says why."""


def node_kind(name: str) -> str:
    """ "broker", "controller", "zookeeper" or "client" for a link end's name."""
    if name in (CLIENT, ZOOKEEPER):
        return name
    if name == KAFKA_CLIENT:
        return CLIENT
    m = _NODE.fullmatch(name)
    if m is None:
        raise FaultRequestError(
            f"bad node name {name!r}: expected broker-N, controller-N, {ZOOKEEPER}, {CLIENT} "
            f"or {KAFKA_CLIENT}"
        )
    return m[1]


@dataclass(frozen=True)
class LinkSpec:
    """One proxied link: the proxy listens on HOST:listen_port and forwards to HOST:target_port."""

    source: str
    target: str
    listen_port: int
    target_port: int

    def __post_init__(self) -> None:
        node_kind(self.source)
        node_kind(self.target)

    @property
    def name(self) -> str:
        return link_name(self.source, self.target)

    @property
    def listen_address(self) -> str:
        return f"{HOST}:{self.listen_port}"

    @property
    def target_address(self) -> str:
        return f"{HOST}:{self.target_port}"

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "target": self.target,
            "listen_port": self.listen_port,
            "target_port": self.target_port,
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LinkSpec:
        try:
            spec = cls(
                str(obj["source"]),
                str(obj["target"]),
                int(obj["listen_port"]),
                int(obj["target_port"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise FaultRequestError(f"bad link {obj!r}: {exc}") from None
        if "name" in obj and obj["name"] != spec.name:
            raise FaultRequestError(f"link {obj['name']!r} must be named {spec.name!r}")
        return spec


def link_name(source: str, target: str) -> str:
    return f"{source}->{target}"


def parse_link_table(obj: Any) -> list[LinkSpec]:
    """The links of a link table (a JSON list of LinkSpec objects): distinct names and ports."""
    if not isinstance(obj, list):
        raise FaultRequestError("a link table is a JSON list of links")
    specs = [LinkSpec.from_json(o) for o in obj]
    for what, values in (
        ("name", [s.name for s in specs]),
        ("listen port", [str(s.listen_port) for s in specs]),
    ):
        dup = sorted({v for v in values if values.count(v) > 1})
        if dup:
            raise FaultRequestError(f"link table: {what} used twice: {', '.join(dup)}")
    return specs


@dataclass(frozen=True)
class DirectionFault:
    """What one direction of a link suffers: `cut` forwards nothing (connections stall, none is
    closed), `delay_ms` holds each chunk that long, `bandwidth` caps bytes/s (0: no cap)."""

    cut: bool = False
    delay_ms: int = 0
    bandwidth: int = 0

    @property
    def clear(self) -> bool:
        return self == DirectionFault()

    def to_json(self) -> dict[str, Any]:
        return {"cut": self.cut, "delay_ms": self.delay_ms, "bandwidth": self.bandwidth}


@dataclass(frozen=True)
class FaultRequest:
    """A change to some links. Which: the explicit `links`, or every link of `node` whose other
    end is one of `peers` (node names or GROUPS; none or "all": every peer). What: each field
    that is not None replaces that part of the selected directions' fault; `reset` closes their
    connections now; `refuse` makes the links close new connections at once (until healed)."""

    node: str | None = None
    peers: tuple[str, ...] = ()
    links: tuple[str, ...] = ()
    direction: Direction = "both"
    cut: bool | None = None
    delay_ms: int | None = None
    bandwidth: int | None = None
    refuse: bool | None = None
    reset: bool = False

    def validate(self) -> None:
        if self.node is None and not self.links:
            raise FaultRequestError("name a node or links")
        if self.node is not None and self.links:
            raise FaultRequestError("name a node or links, not both")
        if self.direction not in DIRECTIONS:
            raise FaultRequestError(f"direction must be one of {', '.join(DIRECTIONS)}")
        if self.delay_ms is not None and not 0 <= self.delay_ms <= MAX_DELAY_MS:
            raise FaultRequestError(f"delay_ms must be in 0..{MAX_DELAY_MS}")
        if self.bandwidth is not None and not 0 <= self.bandwidth <= MAX_BANDWIDTH:
            raise FaultRequestError(f"bandwidth must be in 0..{MAX_BANDWIDTH} bytes/s")

    def apply(self, fault: DirectionFault) -> DirectionFault:
        """`fault` with this request's fields (those given) in place."""
        changes: dict[str, Any] = {}
        for name in ("cut", "delay_ms", "bandwidth"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = value
        return replace(fault, **changes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"direction": self.direction, "reset": self.reset}
        if self.node is not None:
            out["node"] = self.node
        if self.peers:
            out["peers"] = list(self.peers)
        if self.links:
            out["links"] = list(self.links)
        for name in ("cut", "delay_ms", "bandwidth", "refuse"):
            if getattr(self, name) is not None:
                out[name] = getattr(self, name)
        return out

    @classmethod
    def from_json(cls, obj: Any) -> FaultRequest:
        if not isinstance(obj, dict):
            raise FaultRequestError("a request is a JSON object")
        unknown = set(obj) - {f.name for f in fields(cls)}
        if unknown:
            raise FaultRequestError(f"unknown request fields: {sorted(unknown)}")
        try:
            request = cls(
                node=_opt(obj, "node", str),
                peers=tuple(str(p) for p in _opt(obj, "peers", list) or ()),
                links=tuple(str(n) for n in _opt(obj, "links", list) or ()),
                direction=obj.get("direction", "both"),
                cut=_opt(obj, "cut", bool),
                delay_ms=_opt(obj, "delay_ms", int),
                bandwidth=_opt(obj, "bandwidth", int),
                refuse=_opt(obj, "refuse", bool),
                reset=bool(obj.get("reset", False)),
            )
        except (TypeError, ValueError) as exc:
            raise FaultRequestError(f"bad request: {exc}") from None
        request.validate()
        return request


def _opt(obj: Mapping[str, Any], key: str, kind: type[Any]) -> Any:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise TypeError(f"{key} must be {kind.__name__}, got {value!r}")
    return value


def peer_matches(peer: str, wanted: Sequence[str]) -> bool:
    """Whether the link end `peer` is one of `wanted` (node names or GROUPS; empty: all)."""
    if not wanted or ALL in wanted:
        return True
    kind = node_kind(peer)
    return any(w == peer or GROUPS.get(w) == kind for w in wanted)


def check_peers(peers: Iterable[str]) -> None:
    for p in peers:
        if p != ALL and p not in GROUPS:
            try:
                node_kind(p)
            except FaultRequestError:
                groups = ", ".join([*GROUPS, ALL])
                raise FaultRequestError(
                    f"bad peer {p!r}: expected a node name or one of {groups}"
                ) from None


def select(
    specs: Sequence[LinkSpec], request: FaultRequest
) -> list[tuple[LinkSpec, tuple[LinkDirection, ...]]]:
    """The links `request` names, each with the directions it changes; FaultRequestError when
    it names an unknown link or selects nothing (a typo must not pass as a healthy no-op)."""
    out: list[tuple[LinkSpec, tuple[LinkDirection, ...]]] = []
    if request.links:
        by_name = {s.name: s for s in specs}
        missing = [n for n in request.links if n not in by_name]
        if missing:
            raise FaultRequestError(f"no such link: {', '.join(missing)}")
        dirs = _directions(request.direction, outgoing=True)
        return [(by_name[n], dirs) for n in dict.fromkeys(request.links)]
    node = request.node
    assert node is not None  # validate() demands a node or links
    check_peers(request.peers)
    for s in specs:
        if s.source == node and peer_matches(s.target, request.peers):
            out.append((s, _directions(request.direction, outgoing=True)))
        elif s.target == node and peer_matches(s.source, request.peers):
            out.append((s, _directions(request.direction, outgoing=False)))
    if not out:
        peers = ", ".join(request.peers) or ALL
        raise FaultRequestError(f"no link between {node} and {peers} goes through the proxy")
    return out


def _directions(direction: Direction, *, outgoing: bool) -> tuple[LinkDirection, ...]:
    """The link directions carrying `direction` traffic of a node that is the link's source
    (`outgoing`) or its target."""
    if direction == "both":
        return ("forward", "backward")
    sends_forward = (direction == "out") == outgoing
    return ("forward",) if sends_forward else ("backward",)


@dataclass(frozen=True)
class LinkView:
    """A link as `Links` reports it: its spec, its faults, connections and bytes so far."""

    spec: LinkSpec
    forward: DirectionFault
    backward: DirectionFault
    refuse: bool = False
    connections: int = 0  # open now
    accepted: int = 0  # since the proxy started
    forward_bytes: int = 0
    backward_bytes: int = 0

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def faulted(self) -> bool:
        return self.refuse or not (self.forward.clear and self.backward.clear)

    def describe(self) -> str:
        """The faults in a few words: "ok", "cut", "refusing; forward: delay 100 ms, 500 B/s"."""
        if not self.faulted:
            return "ok"
        parts = ["refusing"] if self.refuse else []
        same = self.forward == self.backward
        sides = (
            [("", self.forward)]
            if same
            else [("forward", self.forward), ("backward", self.backward)]
        )
        for side, fault in sides:
            words = ["cut"] if fault.cut else []
            if fault.delay_ms:
                words.append(f"delay {fault.delay_ms} ms")
            if fault.bandwidth:
                words.append(f"{fault.bandwidth} B/s")
            if words:
                parts.append(f"{side}: {', '.join(words)}" if side else ", ".join(words))
        return "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            **self.spec.to_json(),
            "forward": {**self.forward.to_json(), "bytes": self.forward_bytes},
            "backward": {**self.backward.to_json(), "bytes": self.backward_bytes},
            "refuse": self.refuse,
            "connections": self.connections,
            "accepted": self.accepted,
            "state": self.describe(),
        }

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> LinkView:
        def fault(d: Mapping[str, Any]) -> DirectionFault:
            return DirectionFault(bool(d["cut"]), int(d["delay_ms"]), int(d["bandwidth"]))

        return cls(
            spec=LinkSpec.from_json(obj),
            forward=fault(obj["forward"]),
            backward=fault(obj["backward"]),
            refuse=bool(obj["refuse"]),
            connections=int(obj["connections"]),
            accepted=int(obj["accepted"]),
            forward_bytes=int(obj["forward"]["bytes"]),
            backward_bytes=int(obj["backward"]["bytes"]),
        )
