"""A typed ZooKeeper session (through kazoo): connection, reads, writes, pipelined batches,
watches and a walk of the tree. Kafka's own znode operations are in zk_store.py.

Calls block: asyncio shells run them with `asyncio.to_thread`. Callbacks (session state,
watches) run on kazoo's threads; shells hand them to their loop with `call_soon_threadsafe`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, NamedTuple

from kazoo import exceptions as kz_exc
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry
from kazoo.security import CREATOR_ALL_ACL, READ_ACL_UNSAFE

from minibroker.runtime import zk_auth
from minibroker.runtime.zk_auth import ZkLogin, process_login
from minibroker.runtime.zk_errors import (
    Node,
    SessionState,
    Stat,
    ZkConnectionError,
    ZkError,
    ZkNodeExists,
    ZkNoNode,
    call_mapped,
    first_failure,
    mapped_error,
    stat_of,
)
from minibroker.runtime.zk_handler import PollingHandler

log = logging.getLogger(__name__)

# Kafka's zookeeper.max.in.flight.requests default (reference §7.1): how many pipelined
# requests may be unanswered at once.
MAX_IN_FLIGHT_REQUESTS = 10


class WriteOp(NamedTuple):
    """One write of a multi (`ZkClient.multi_many`): create a persistent znode, or set one."""

    path: str
    data: bytes
    create: bool = True


class ZkClient:
    """A typed ZooKeeper session for one process."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int,
        connection_timeout_ms: int | None = None,
        max_in_flight_requests: int = MAX_IN_FLIGHT_REQUESTS,
        login: ZkLogin | None = None,
    ) -> None:
        """`login`: who to be to ZooKeeper (default: the process's, zk_auth.configure)."""
        self.connect = connect
        self.login = login or process_login()
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.max_in_flight_requests = max(1, max_in_flight_requests)
        self._client = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            handler=PollingHandler(),
            logger=logging.getLogger("kazoo.client"),
            auth_data=self.login.auth_data if self.login else None,
            default_acl=self.acl_for("/"),
        )
        self._pipelined_watches: dict[str, Callable[[], None]] = {}

    # ---- session -----------------------------------------------------------------------------

    def start(self) -> None:
        try:
            self._client.start(timeout=self.connection_timeout_ms / 1000.0)
        except KazooTimeoutError:
            self._client.stop()
            self._client.close()
            raise ZkConnectionError(
                f"could not connect to ZooKeeper at {self.connect} within "
                f"{self.connection_timeout_ms} ms"
            ) from None

    def stop(self) -> None:
        """Close the session: ZooKeeper deletes this session's ephemeral nodes at once."""
        try:
            self._client.stop()
        finally:
            self._client.close()

    @property
    def session_id(self) -> int | None:
        cid = self._client.client_id
        return int(cid[0]) if cid else None

    @property
    def connected(self) -> bool:
        return bool(self._client.connected)

    def add_state_listener(self, callback: Callable[[SessionState], None]) -> None:
        """Call `callback` (on a kazoo thread) on every connection state change."""
        states = {
            KazooState.CONNECTED: SessionState.CONNECTED,
            KazooState.SUSPENDED: SessionState.SUSPENDED,
            KazooState.LOST: SessionState.LOST,
        }

        def listener(state: Any) -> None:
            callback(states[state])

        self._client.add_listener(listener)

    # ---- plain operations --------------------------------------------------------------------

    def get(self, path: str) -> tuple[bytes | None, Stat]:
        data, stat = call_mapped(self._client.get, path)
        return data, stat_of(stat)

    def get_or_none(self, path: str) -> tuple[bytes | None, Stat] | None:
        try:
            return self.get(path)
        except ZkNoNode:
            return None

    def _pipelined(self, calls: Iterable[Callable[[], Any]]) -> list[Any]:
        """Start each async kazoo call, with at most `max_in_flight_requests` unanswered at a
        time (as Kafka's ZooKeeperClient pipelines its batches), so many requests cost about
        one round trip each `max_in_flight_requests`. Returns, in order, each call's value or
        the kazoo exception it failed with."""
        outcomes: list[Any] = []
        window: deque[Any] = deque()

        def settle(result: Any) -> None:
            try:
                outcomes.append(result.get())
            except kz_exc.KazooException as exc:
                outcomes.append(exc)

        for call in calls:
            if len(window) >= self.max_in_flight_requests:
                settle(window.popleft())
            window.append(call())
        while window:
            settle(window.popleft())
        return outcomes

    def get_many(self, paths: Iterable[str]) -> dict[str, tuple[bytes | None, Stat] | None]:
        """Read many znodes pipelined (see `_pipelined`): thousands of partition states in tens
        of milliseconds, not one round trip each. A missing znode maps to None; any other
        failure raises as `get` does."""
        wanted = list(paths)
        outcomes = self._pipelined(functools.partial(self._client.get_async, p) for p in wanted)
        out: dict[str, tuple[bytes | None, Stat] | None] = {}
        for path, outcome in zip(wanted, outcomes, strict=True):
            if isinstance(outcome, kz_exc.NoNodeError):
                out[path] = None
            elif isinstance(outcome, Exception):
                raise mapped_error(outcome) from outcome
            else:
                out[path] = (outcome[0], stat_of(outcome[1]))
        return out

    def multi_many(self, batches: Iterable[Sequence[WriteOp]]) -> list[ZkError | None]:
        """Each batch of writes as one multi (all of it applied or none), the multis pipelined
        (see `_pipelined`): per batch, in order, None or the error of the write that failed
        it. A ZooKeeper write costs mostly per request, so thousands of small writes in a few
        dozen multis take a fraction of a second where one request each takes seconds.
        Anything but a failed write (a lost connection) raises."""

        def start(ops: Sequence[WriteOp]) -> Any:
            tx = self._client.transaction()
            for op in ops:
                if op.create:
                    tx.create(op.path, op.data, acl=self.acl_for(op.path))
                else:
                    tx.set_data(op.path, op.data)
            return tx.commit_async()

        out: list[ZkError | None] = []
        for outcome in self._pipelined(functools.partial(start, batch) for batch in batches):
            if isinstance(outcome, Exception):
                raise mapped_error(outcome) from outcome
            out.append(first_failure(outcome))
        return out

    def exists(self, path: str) -> Stat | None:
        stat = call_mapped(self._client.exists, path)
        return stat_of(stat) if stat is not None else None

    def children(self, path: str) -> list[str]:
        return sorted(call_mapped(self._client.get_children, path))

    def children_with_stat(self, path: str) -> tuple[list[str], Stat]:
        """The children and the parent's stat, read together (its cversion counts changes)."""
        children, stat = call_mapped(self._client.get_children, path, include_data=True)
        return sorted(children), stat_of(stat)

    def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a znode; returns its path (with the sequence suffix for sequential ones)."""
        if makepath:
            self.ensure_paths([path.rsplit("/", 1)[0]] if path.count("/") > 1 else [])
        created: str = call_mapped(
            self._client.create,
            path,
            data,
            acl=self.acl_for(path),
            ephemeral=ephemeral,
            sequence=sequential,
            makepath=makepath,
        )
        return created

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Set data; with `version` >= 0 only if the znode is at that version, else ZkBadVersion."""
        return stat_of(call_mapped(self._client.set, path, data, version=version))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        call_mapped(self._client.delete, path, version=version, recursive=recursive)

    def acl_for(self, path: str) -> list[Any] | None:
        """The ACL a znode created at `path` gets (zookeeper.set.acl; None: the default)."""
        names = self.login.acl_for(path) if self.login else None
        if names is None:
            return None
        kazoo_acls = {zk_auth.CREATOR_ALL: CREATOR_ALL_ACL, zk_auth.READ_UNSAFE: READ_ACL_UNSAFE}
        return [acl for name in names for acl in kazoo_acls[name]]

    def ensure_paths(self, paths: Iterable[str]) -> None:
        """Each path and its parents, every one with its own ACL (a sensitive parent stays
        unreadable to the world, as Kafka creates its persistent paths)."""
        for path in paths:
            if call_mapped(self._client.exists, path) is not None:
                continue  # the common case: one round trip
            parts = [p for p in path.split("/") if p]
            for i in range(1, len(parts) + 1):
                prefix = "/" + "/".join(parts[:i])
                if call_mapped(self._client.exists, prefix) is None:
                    with contextlib.suppress(ZkNodeExists):
                        call_mapped(self._client.create, prefix, b"", acl=self.acl_for(prefix))

    # ---- Kafka's compound writes -------------------------------------------------------------

    # ---- watches -----------------------------------------------------------------------------

    def watch_data(
        self, path: str, callback: Callable[[bytes | None, Stat | None], bool | None]
    ) -> None:
        """Call `callback(data, stat)` now and whenever the znode changes, appears or goes away
        (data and stat are None while it does not exist). Survives session expiry. The watch
        ends when the callback returns False (kazoo's DataWatch rule)."""

        def fn(data: bytes | None, stat: Any, _event: Any = None) -> bool | None:
            return callback(data, stat_of(stat) if stat is not None else None)

        self._client.DataWatch(path, fn)

    def watch_data_pipelined(
        self, path: str, callback: Callable[[bytes | None, Stat | None], None]
    ) -> None:
        """As `watch_data`, for many znodes that change together (a broker's thousand partition
        states): when one changes it is re-read without waiting for the re-reads of the others,
        which kazoo's DataWatch does one round trip after another (a second per thousand).
        The watch is armed again with each read, and every watched znode is read again whenever
        the session (re)connects, so a change missed while disconnected is seen then."""

        def on_event(_event: Any) -> None:
            read()

        def read() -> None:
            try:
                self._client.get_async(path, watch=on_event).rawlink(got)
            except Exception:  # closing, or not connected: the reconnection reads it again
                return

        def got(result: Any) -> None:
            if result.successful():
                data, stat = result.value
                callback(data, stat_of(stat))
            elif isinstance(result.exception, kz_exc.NoNodeError):
                try:
                    self._client.exists_async(path, watch=on_event).rawlink(exists)
                except Exception:
                    return

        def exists(result: Any) -> None:
            if not result.successful():
                return
            if result.value is not None:
                read()  # created between the two reads
            else:
                callback(None, None)

        if not self._pipelined_watches:
            self._client.add_listener(self._reread_watched)
        self._pipelined_watches[path] = read
        read()

    def _reread_watched(self, state: Any) -> None:
        if state == KazooState.CONNECTED:
            reads = list(self._pipelined_watches.values())
            self._client.handler.spawn(lambda: [read() for read in reads])

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> None:
        """Call `callback(children)` now and whenever the child list of `path` changes."""

        def fn(children: list[str]) -> None:
            callback(sorted(children))

        self._client.ChildrenWatch(path, fn)

    # ---- inspection --------------------------------------------------------------------------

    def walk(self, root: str = "/", *, skip: tuple[str, ...] = ("/zookeeper",)) -> Iterator[Node]:
        """Every znode under `root` (depth first, children sorted), with data and stat."""
        stack = [root]
        while stack:
            path = stack.pop()
            if path in skip:
                continue
            got = self.get_or_none(path)
            if got is None:
                continue
            data, stat = got
            yield Node(path, data, stat)
            try:
                kids = self.children(path)
            except ZkNoNode:
                continue
            prefix = "" if path == "/" else path
            stack.extend(f"{prefix}/{k}" for k in reversed(kids))
