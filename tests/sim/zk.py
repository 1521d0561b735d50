"""An in-memory ZooKeeper (node 0) and the client each simulated node uses.

What it keeps of ZooKeeper's semantics: znode versions and conditional set/delete; ephemeral
nodes owned by sessions; sequential nodes; atomic multi (all or nothing); one-shot data and
child watches, delivered while the session lives; sessions that expire when their client has
been unreachable (crashed, or cut from node 0) for the session timeout. A client learns of the
expiry only when it can reach ZooKeeper again, as with a real server. Requests and responses
travel the simulated network, so either can be lost: the client resends until it gets an
answer, and a resent write may run twice (the callers handle that as Kafka does).
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from dataclasses import dataclass, replace
from typing import Any

from tests.sim.kernel import IDLE, ZK_NODE, Kernel
from tests.sim.messages import (
    Check,
    Children,
    Create,
    Delete,
    Get,
    Multi,
    MultiFailed,
    SetData,
    Stat,
    ZkErr,
    ZkOp,
    ZkRequest,
    ZkResponse,
    ZkSessionExpired,
    ZkWatchEvent,
)
from tests.sim.network import Network

RESEND_MS = 300
NOTIFY_RETRY_MS = 100

ZkTaskGen = Generator[ZkOp, Any, None]


@dataclass(frozen=True, slots=True)
class Znode:
    data: Any
    version: int
    czxid: int
    owner: int  # ephemeral owner session, 0 for persistent nodes
    children: tuple[str, ...] = ()
    next_sequence: int = 0


@dataclass(slots=True)
class Session:
    node: int
    disconnected_since: int | None = None
    expired: bool = False
    abandoned: bool = False  # its client process died; a restarted one opens a new session
    told_expired: bool = False


class ZkServer:
    alive = True

    def __init__(self, kernel: Kernel, net: Network, session_timeout_ms: int) -> None:
        self.kernel = kernel
        self.net = net
        self.session_timeout_ms = session_timeout_ms
        self.nodes: dict[str, Znode] = {"/": Znode(None, 0, 0, 0)}
        self.zxid = 0
        self.sessions: dict[int, Session] = {}
        self._next_session = 0
        self.data_watches: dict[str, dict[int, None]] = {}
        self.child_watches: dict[str, dict[int, None]] = {}
        # Told (path, old data or None, new data or None) after every committed change.
        self.on_change: Callable[[str, Any, Any], None] = lambda path, old, new: None
        net.zk_link_changed = self.link_changed

    def seed(self, path: str, data: Any = None) -> None:
        """Create a persistent znode before the run (what an admin set up beforehand)."""
        result = self._write(Create(path, data), 0, [], [])
        assert result == path, result

    # ---- sessions ------------------------------------------------------------------------

    def open_session(self, node: int) -> int:
        self._next_session += 1
        self.sessions[self._next_session] = Session(node)
        return self._next_session

    def _reachable(self, node: int) -> bool:
        return self.net.nodes[node].alive and self.net.connected(ZK_NODE, node)

    def link_changed(self, node: int) -> None:
        """A node crashed, restarted, or its link to ZooKeeper went down or up."""
        up = self._reachable(node)
        for sid, s in self.sessions.items():
            if s.node != node or s.told_expired:
                continue
            if s.expired:
                if up and not s.abandoned:
                    s.told_expired = True
                    self._notify(sid, ZkSessionExpired(sid))
            elif up and not s.abandoned:
                s.disconnected_since = None
            elif s.disconnected_since is None:
                s.disconnected_since = self.kernel.now
                self.kernel.after(self.session_timeout_ms, ZK_NODE, self._maybe_expire, sid)

    def abandon(self, node: int) -> None:
        """The node's process died: its sessions live on only until they time out."""
        for s in self.sessions.values():
            if s.node == node:
                s.abandoned = True
        self.link_changed(node)

    def _maybe_expire(self, sid: int) -> None:
        s = self.sessions[sid]
        since = s.disconnected_since
        if s.expired or since is None or self.kernel.now - since < self.session_timeout_ms:
            return
        s.expired = True
        self.kernel.note(f"zk: session {sid} of node {s.node} expired")
        fired: list[tuple[str, bool]] = []
        for path in [p for p, z in self.nodes.items() if z.owner == sid]:
            data = self.nodes[path].data
            self._delete(path, fired)
            self.on_change(path, data, None)
        self._fire(fired)

    # ---- requests ------------------------------------------------------------------------

    def on_message(self, src: int, msg: Any) -> None:
        if not isinstance(msg, ZkRequest):
            return
        s = self.sessions.get(msg.session)
        if s is None or s.expired:
            result: Any = ZkErr.SESSION_EXPIRED
        else:
            fired: list[tuple[str, bool]] = []
            changes: list[tuple[str, Any, Any]] = []
            result = self._run(msg.op, msg.session, fired, changes)
            for path, old, new in changes:
                self.on_change(path, old, new)
            self._fire(fired)
        self.net.send(ZK_NODE, src, ZkResponse(msg.req_id, result))

    def _run(
        self, op: ZkOp, sid: int, fired: list[tuple[str, bool]], changes: list[tuple[str, Any, Any]]
    ) -> Any:
        if isinstance(op, Get):
            z = self.nodes.get(op.path)
            if op.watch:
                self.data_watches.setdefault(op.path, {})[sid] = None
            return ZkErr.NONODE if z is None else Stat(z.data, z.version, z.czxid, z.owner)
        if isinstance(op, Children):
            z = self.nodes.get(op.path)
            if z is None:
                return ZkErr.NONODE
            if op.watch:
                self.child_watches.setdefault(op.path, {})[sid] = None
            base = op.path.rstrip("/") + "/"
            kids = [(name, self.nodes[base + name]) for name in sorted(z.children)]
            return tuple((n, Stat(c.data, c.version, c.czxid, c.owner)) for n, c in kids)
        if isinstance(op, Multi):
            # All or nothing: on the first failure restore the znodes (they are immutable
            # values, so a shallow copy of the table is a snapshot) and report which op failed.
            saved = dict(self.nodes), self.zxid
            staged_fired: list[tuple[str, bool]] = []
            staged_changes: list[tuple[str, Any, Any]] = []
            results: list[Any] = []
            for i, sub in enumerate(op.ops):
                result = self._write(sub, sid, staged_fired, staged_changes)
                if isinstance(result, ZkErr):
                    self.nodes, self.zxid = saved
                    return MultiFailed(i, result)
                results.append(result)
            fired += staged_fired
            changes += staged_changes
            return results
        return self._write(op, sid, fired, changes)

    def _write(
        self, op: ZkOp, sid: int, fired: list[tuple[str, bool]], changes: list[tuple[str, Any, Any]]
    ) -> Any:
        nodes = self.nodes
        if isinstance(op, Check):
            z = nodes.get(op.path)
            if z is None:
                return ZkErr.NONODE
            return ZkErr.BADVERSION if op.version not in (-1, z.version) else True
        if isinstance(op, Create):
            parent_path, _, name = op.path.rpartition("/")
            parent_path = parent_path or "/"
            parent = nodes.get(parent_path)
            if parent is None:
                return ZkErr.NONODE
            path = op.path
            if op.sequential:
                suffix = f"{parent.next_sequence:010d}"
                path, name = path + suffix, name + suffix
                parent = nodes[parent_path] = replace(
                    parent, next_sequence=parent.next_sequence + 1
                )
            if path in nodes:
                return ZkErr.NODEEXISTS
            self.zxid += 1
            nodes[path] = Znode(op.data, 0, self.zxid, sid if op.ephemeral else 0)
            nodes[parent_path] = replace(parent, children=(*parent.children, name))
            fired += [(path, False), (parent_path, True)]
            changes.append((path, None, op.data))
            return path
        if not isinstance(op, SetData | Delete):
            raise TypeError(f"not a ZooKeeper write: {op!r}")
        z = nodes.get(op.path)
        if z is None:
            return ZkErr.NONODE
        if op.version not in (-1, z.version):
            return ZkErr.BADVERSION
        if isinstance(op, SetData):
            nodes[op.path] = replace(z, data=op.data, version=z.version + 1)
            fired.append((op.path, False))
            changes.append((op.path, z.data, op.data))
            return z.version + 1
        if z.children:
            return ZkErr.NOTEMPTY
        self._delete(op.path, fired)
        changes.append((op.path, z.data, None))
        return True

    def _delete(self, path: str, fired: list[tuple[str, bool]]) -> None:
        del self.nodes[path]
        parent_path, _, name = path.rpartition("/")
        parent_path = parent_path or "/"
        parent = self.nodes[parent_path]
        self.nodes[parent_path] = replace(
            parent, children=tuple(c for c in parent.children if c != name)
        )
        fired += [(path, False), (parent_path, True)]

    # ---- watches -------------------------------------------------------------------------

    def _fire(self, fired: list[tuple[str, bool]]) -> None:
        for path, is_child in fired:
            watches = (self.child_watches if is_child else self.data_watches).pop(path, None)
            for sid in watches or ():
                self._notify(sid, ZkWatchEvent(sid, path))

    def _notify(self, sid: int, msg: ZkWatchEvent | ZkSessionExpired) -> None:
        """Deliver without loss while the session lives (ZooKeeper re-sends watches on
        reconnect); wait while its client is unreachable."""
        s = self.sessions[sid]
        if s.abandoned or (s.expired and isinstance(msg, ZkWatchEvent)):
            return
        if self._reachable(s.node):
            self.kernel.after(self.net.delay_min, s.node, self._deliver_notice, sid, msg)
        else:
            self.kernel.after(NOTIFY_RETRY_MS, ZK_NODE, self._notify, sid, msg)

    def _deliver_notice(self, sid: int, msg: ZkWatchEvent | ZkSessionExpired) -> None:
        s = self.sessions[sid]
        if s.abandoned:
            return
        if not self._reachable(s.node):
            self._notify(sid, msg)
            return
        self.net.nodes[s.node].on_message(ZK_NODE, msg)


class ZkClient:
    """One node's ZooKeeper session: requests with resend until answered, watch and expiry
    notifications handed to the owner."""

    def __init__(
        self,
        kernel: Kernel,
        net: Network,
        server: ZkServer,
        node: int,
        on_watch: Callable[[str], None],
        on_expired: Callable[[], None],
    ) -> None:
        self.kernel = kernel
        self.net = net
        self.server = server
        self.node = node
        self.on_watch = on_watch
        self.on_expired = on_expired
        self.session = 0
        self._pending: dict[int, Callable[[Any], None]] = {}

    def connect(self, on_connected: Callable[[], None]) -> None:
        """Open a new session once ZooKeeper is reachable (retried every 200 ms)."""
        if self.net.nodes[self.node].alive and self.net.connected(self.node, ZK_NODE):
            self.session = self.server.open_session(self.node)
            on_connected()
        elif self.net.nodes[self.node].alive:
            self.kernel.after(200, self.node, self.connect, on_connected)

    def drop(self) -> None:
        """The process died: forget the session and every request waiting on it."""
        self.session = 0
        self._pending = {}

    def call(self, op: ZkOp, callback: Callable[[Any], None]) -> None:
        req_id = self.kernel.next_id()
        self._pending[req_id] = callback
        self._send(req_id, op, self.session)

    def _send(self, req_id: int, op: ZkOp, session: int) -> object:
        if req_id not in self._pending or session != self.session:
            return IDLE
        self.net.send(self.node, ZK_NODE, ZkRequest(req_id, session, op))
        self.kernel.after(RESEND_MS, self.node, self._send, req_id, op, session)
        return None

    def run(self, task: ZkTaskGen) -> None:
        """Drive a generator that yields ZooKeeper ops and receives their results."""

        def step(result: Any) -> None:
            try:
                op = task.send(result)
            except StopIteration:
                return
            self.call(op, step)

        step(None)

    def on_message(self, msg: Any) -> None:
        if isinstance(msg, ZkResponse):
            if msg.req_id not in self._pending:
                return
            if msg.result is ZkErr.SESSION_EXPIRED:
                self._expired()  # answers every pending request, this one included
            else:
                self._pending.pop(msg.req_id)(msg.result)
        elif isinstance(msg, ZkWatchEvent):
            if msg.session == self.session:
                self.on_watch(msg.path)
        elif isinstance(msg, ZkSessionExpired) and msg.session == self.session:
            self._expired()

    def _expired(self) -> None:
        if self.session == 0:
            return
        self.session = 0
        pending, self._pending = self._pending, {}
        for callback in pending.values():
            callback(ZkErr.SESSION_EXPIRED)
        self.on_expired()
