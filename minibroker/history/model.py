"""An application's client history as plain values: each send with its outcome, each record a
poll returned, each commit, each transaction and each assignment, in the order the recorder saw
them. Pure data, no I/O: the checker's rules are functions of a ClientHistory, so tests build
one by hand; `to_line`/`from_line` are the JSON lines a recorder writes (one op per line, so a
history survives its process being killed).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

# A send's outcome, as Jepsen's histories say it: ok (acknowledged, with its offset), fail (it
# certainly did not happen), info (indefinite: a timeout or a lost connection; it may be in
# the log), pending (the history ended before an answer came).
OK, FAIL, INFO, PENDING = "ok", "fail", "info", "pending"
COMMITTED, ABORTED = "committed", "aborted"


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def show(value: bytes | None, limit: int = 40) -> str:
    """A value for a report line: text when it is text, cut at `limit` characters."""
    if value is None:
        return "null"
    try:
        text = value.decode()
    except UnicodeDecodeError:
        text = value.hex()
    return repr(text if len(text) <= limit else text[:limit] + "…")


def as_bytes(data: Any) -> bytes | None:
    """What a client sent or read, as the bytes the checker compares: bytes as they are, text
    as UTF-8, anything else (a serializer's input) by its repr."""
    if data is None or isinstance(data, bytes):
        return data
    if isinstance(data, str):
        return data.encode()
    return repr(data).encode()


class Recording(Protocol):
    """What a recording client needs of its recorder (minibroker.history.recorder)."""

    def now_ms(self) -> int: ...

    def client_name(self, kind: str) -> str: ...

    def record(self, op: Op) -> None: ...

    def remember_group(self, metadata: object, group: str) -> None: ...

    def group_of(self, metadata: object) -> str: ...


@dataclass(frozen=True)
class Send:
    """One record a producer was asked to send, and what became of it. `txn` names the
    transaction it was sent in (`client#n`), or is empty."""

    id: str  # the client's name and its sequence number: a completion rewrites the invoke
    client: str
    topic: str
    key: bytes | None
    value: bytes | None
    invoke_ms: int
    outcome: str = PENDING
    partition: int = -1
    offset: int = -1
    complete_ms: int = 0
    error: str = ""
    txn: str = ""
    op: str = field(default="send", repr=False)


@dataclass(frozen=True)
class Read:
    """One record a consumer's poll returned."""

    client: str
    group: str
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    ts_ms: int
    read_committed: bool = False
    op: str = field(default="read", repr=False)


@dataclass(frozen=True)
class Commit:
    """Offsets a consumer (or a transaction, `txn`) committed for `group`: the next offset to
    read of each partition, as Kafka's OffsetCommit says it."""

    client: str
    group: str
    offsets: tuple[tuple[str, int, int], ...]  # (topic, partition, next offset)
    ts_ms: int
    outcome: str = OK
    txn: str = ""
    error: str = ""
    op: str = field(default="commit", repr=False)


@dataclass(frozen=True)
class Txn:
    """A transaction's end: committed, aborted, or info (the commit's answer never came)."""

    client: str
    txn: str
    begin_ms: int
    end_ms: int
    outcome: str
    error: str = ""
    op: str = field(default="txn", repr=False)


@dataclass(frozen=True)
class Assign:
    """A consumer's assignment changed (a rebalance, assign() or a seek): its position in
    these partitions may go back to the committed offset."""

    client: str
    group: str
    partitions: tuple[tuple[str, int], ...]
    ts_ms: int
    op: str = field(default="assign", repr=False)


@dataclass(frozen=True)
class Idle:
    """A consumer polled and got nothing (recorded at most once a second per consumer): that
    it was still asking is what tells a stalled consumer from one that stopped."""

    client: str
    group: str
    ts_ms: int
    read_committed: bool = False
    op: str = field(default="idle", repr=False)


Op = Send | Read | Commit | Txn | Assign | Idle
IDLE_EVERY_MS = 1000


class IdlePolls:
    """A recording consumer's empty polls, as Idle ops at most once every IDLE_EVERY_MS."""

    def __init__(self, recorder: Recording, client: str, group: str, read_committed: bool):
        self._recorder, self._client, self._group = recorder, client, group
        self._read_committed = read_committed
        self._last_ms: int | None = None

    def empty(self) -> None:
        now = self._recorder.now_ms()
        if self._last_ms is None or now - self._last_ms >= IDLE_EVERY_MS:
            self._last_ms = now
            self._recorder.record(Idle(self._client, self._group, now, self._read_committed))


def _op_ms(op: Op) -> int:
    if isinstance(op, Send):
        return op.invoke_ms
    if isinstance(op, Txn):
        return op.end_ms
    return op.ts_ms


_KINDS: dict[str, type] = {
    "send": Send,
    "read": Read,
    "commit": Commit,
    "txn": Txn,
    "assign": Assign,
    "idle": Idle,
}
_BYTES = ("key", "value")


def to_line(op: Op) -> dict[str, Any]:
    """An op as one JSON object (bytes as base64)."""
    out = dict(op.__dict__)
    for name in _BYTES:
        if name in out:
            out[name] = _b64(out[name])
    return out


def from_line(raw: Mapping[str, Any]) -> Op:
    """The op a `to_line` object describes."""
    data = dict(raw)
    kind = _KINDS[data["op"]]
    for name in _BYTES:
        if name in data:
            data[name] = _unb64(data[name])
    if "offsets" in data:
        data["offsets"] = tuple(tuple(o) for o in data["offsets"])
    if "partitions" in data:
        data["partitions"] = tuple(tuple(p) for p in data["partitions"])
    return kind(**data)  # type: ignore[no-any-return]


@dataclass(frozen=True)
class ClientHistory:
    """Every op, in the order recorded. A send appears at its invoke and again at its
    completion (same `id`): `sends` keeps the latest of each."""

    ops: tuple[Op, ...]

    @classmethod
    def of(cls, *parts: Iterable[Op]) -> ClientHistory:
        """One history of several recorders' ops (several processes' files), by time."""
        ops = [o for part in parts for o in part]
        return cls(tuple(sorted(ops, key=_op_ms)))

    @property
    def sends(self) -> list[Send]:
        latest: dict[str, Send] = {}
        for o in self.ops:
            if isinstance(o, Send):
                latest[o.id] = o
        return list(latest.values())

    @property
    def reads(self) -> list[Read]:
        return [o for o in self.ops if isinstance(o, Read)]

    @property
    def commits(self) -> list[Commit]:
        return [o for o in self.ops if isinstance(o, Commit)]

    @property
    def transactions(self) -> dict[str, Txn]:
        return {o.txn: o for o in self.ops if isinstance(o, Txn)}

    def summary(self) -> dict[str, int]:
        sends = self.sends
        return {
            "sends": len(sends),
            "acknowledged": sum(s.outcome == OK for s in sends),
            "failed": sum(s.outcome == FAIL for s in sends),
            "indefinite": sum(s.outcome in (INFO, PENDING) for s in sends),
            "reads": len(self.reads),
            "commits": len(self.commits),
            "transactions": len(self.transactions),
        }
