"""The one module that talks to ZooKeeper (through kazoo); everything else sees typed calls.

Calls block: asyncio shells run them with `asyncio.to_thread`. Callbacks (session state,
watches) run on kazoo's threads; shells hand them to their loop with `call_soon_threadsafe`.
kazoo's exceptions are mapped to the ZkError classes below, as kazoo maps server codes.
"""

from __future__ import annotations

import contextlib
import functools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from kazoo import exceptions as kz_exc
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.retry import KazooRetry

from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    IsrChangeNotificationSequenceZNode,
    TopicPartitionStateZNode,
    TopicPartitionsZNode,
    TopicPartitionZNode,
)

log = logging.getLogger(__name__)
T = TypeVar("T")
# Kafka's zookeeper.max.in.flight.requests default (reference §7.1): how many pipelined
# requests may be unanswered at once.
MAX_IN_FLIGHT_REQUESTS = 10


class ZkError(Exception):
    """A ZooKeeper operation failed."""


class ZkNoNode(ZkError):
    pass


class ZkNodeExists(ZkError):
    pass


class ZkBadVersion(ZkError):
    pass


class ZkNotEmpty(ZkError):
    pass


class ZkConnectionError(ZkError):
    """No usable session: not connected, connection lost mid-call, or session expired."""


class ControllerMoved(ZkError):
    """A fenced controller write failed its /controller_epoch check: another controller won."""


class BrokerIdAlreadyRegistered(ZkError):
    """Another live session owns /brokers/ids/<id>."""


class SessionState(Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost; the session may still be alive
    LOST = "lost"  # the session expired: its ephemeral nodes and watches are gone


@dataclass(frozen=True)
class Stat:
    version: int
    czxid: int
    mzxid: int
    ephemeral_owner: int
    num_children: int
    data_length: int
    ctime_ms: int = 0  # the server's clock when the node was created
    mtime_ms: int = 0  # the server's clock when the data was last set
    cversion: int = 0  # changes to the node's children (one per create or delete of a child)

    @property
    def ephemeral(self) -> bool:
        return self.ephemeral_owner != 0


@dataclass(frozen=True)
class Node:
    path: str
    data: bytes | None
    stat: Stat


def _stat(s: Any) -> Stat:
    return Stat(
        version=s.version,
        czxid=s.czxid,
        mzxid=s.mzxid,
        ephemeral_owner=s.ephemeralOwner,
        ctime_ms=s.ctime,
        mtime_ms=s.mtime,
        cversion=s.cversion,
        num_children=s.numChildren,
        data_length=s.dataLength,
    )


_MAPPED: tuple[tuple[type[Exception], type[ZkError]], ...] = (
    (kz_exc.NoNodeError, ZkNoNode),
    (kz_exc.NodeExistsError, ZkNodeExists),
    (kz_exc.BadVersionError, ZkBadVersion),
    (kz_exc.NotEmptyError, ZkNotEmpty),
    (kz_exc.ConnectionClosedError, ZkConnectionError),
    (kz_exc.ConnectionLoss, ZkConnectionError),
    (kz_exc.SessionExpiredError, ZkConnectionError),
    (kz_exc.OperationTimeoutError, ZkConnectionError),
)


def _mapped(exc: BaseException) -> ZkError:
    for kz, ours in _MAPPED:
        if isinstance(exc, kz):
            return ours(f"{type(exc).__name__}: {exc}")
    return ZkError(f"{type(exc).__name__}: {exc}")


def _call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    try:
        return fn(*args, **kwargs)
    except kz_exc.KazooException as exc:
        raise _mapped(exc) from exc


def _first_failure(results: list[Any]) -> ZkError | None:
    """The error of a failed multi: the op that failed, not the rolled-back ones."""
    errors = [r for r in results if isinstance(r, Exception)]
    real = [e for e in errors if not isinstance(e, kz_exc.RolledBackError)]
    if real:
        return _mapped(real[0])
    return _mapped(errors[0]) if errors else None


class ZkStore:
    """A typed ZooKeeper session for one process."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int,
        connection_timeout_ms: int | None = None,
        max_in_flight_requests: int = MAX_IN_FLIGHT_REQUESTS,
    ) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms or session_timeout_ms
        self.max_in_flight_requests = max(1, max_in_flight_requests)
        self._client = KazooClient(
            hosts=connect,
            timeout=session_timeout_ms / 1000.0,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            logger=logging.getLogger("kazoo.client"),
        )

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
        data, stat = _call(self._client.get, path)
        return data, _stat(stat)

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
                raise _mapped(outcome) from outcome
            else:
                out[path] = (outcome[0], _stat(outcome[1]))
        return out

    def exists(self, path: str) -> Stat | None:
        stat = _call(self._client.exists, path)
        return _stat(stat) if stat is not None else None

    def children(self, path: str) -> list[str]:
        return sorted(_call(self._client.get_children, path))

    def children_with_stat(self, path: str) -> tuple[list[str], Stat]:
        """The children and the parent's stat, read together (its cversion counts changes)."""
        children, stat = _call(self._client.get_children, path, include_data=True)
        return sorted(children), _stat(stat)

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
        created: str = _call(
            self._client.create,
            path,
            data,
            ephemeral=ephemeral,
            sequence=sequential,
            makepath=makepath,
        )
        return created

    def set(self, path: str, data: bytes, version: int = -1) -> Stat:
        """Set data; with `version` >= 0 only if the znode is at that version, else ZkBadVersion."""
        return _stat(_call(self._client.set, path, data, version=version))

    def delete(self, path: str, version: int = -1, *, recursive: bool = False) -> None:
        _call(self._client.delete, path, version=version, recursive=recursive)

    def ensure_paths(self, paths: Iterable[str]) -> None:
        for path in paths:
            _call(self._client.ensure_path, path)

    # ---- Kafka's compound writes -------------------------------------------------------------

    def register_broker(
        self, broker_id: int, data: bytes, *, previous_session_id: int | None = None
    ) -> int:
        """Register /brokers/ids/<id> as Kafka's KafkaZkClient.registerBroker does (ref. §1.3).

        One multi of create(empty, EPHEMERAL) + setData(expected version 0), so the znode ends at
        dataVersion 1. kazoo cannot send Kafka's null data; the empty bytes are overwritten in the
        same multi, so no reader ever sees them. Returns the broker epoch: the znode's czxid.
        A znode left by this broker's previous (expired) session is deleted and re-created
        (KAFKA-7165); one owned by another live session raises BrokerIdAlreadyRegistered.
        """
        path = BrokerIdZNode.path(broker_id)
        for _attempt in range(2):
            tx = self._client.transaction()
            tx.create(path, b"", ephemeral=True)
            tx.set_data(path, data, version=0)
            results = _call(tx.commit)
            failure = _first_failure(results)
            if failure is None:
                return int(results[1].czxid)
            if not isinstance(failure, ZkNodeExists):
                raise failure
            stat = self.exists(path)
            if stat is None:
                continue  # vanished between the two calls: try again
            if stat.ephemeral_owner == self.session_id:
                return stat.czxid  # our own, from a multi retried after a connection loss
            if previous_session_id is not None and stat.ephemeral_owner == previous_session_id:
                with contextlib.suppress(ZkNoNode):
                    self.delete(path, version=stat.version)
                continue
            raise BrokerIdAlreadyRegistered(
                f"{path} is held by session {stat.ephemeral_owner:#x}, not ours"
                f" ({(self.session_id or 0):#x}): is another broker {broker_id} running?"
            )
        raise ZkError(f"could not register {path}")

    def read_controller_epoch(self) -> tuple[int, int] | None:
        """(epoch, zkVersion) of /controller_epoch, or None if it does not exist."""
        got = self.get_or_none(ControllerEpochZNode.path)
        if got is None:
            return None
        data, stat = got
        return ControllerEpochZNode.decode(data), stat.version

    def ensure_controller_epoch(self) -> tuple[int, int]:
        """Read /controller_epoch, creating it with 0 if missing (reference §1.7)."""
        current = self.read_controller_epoch()
        if current is not None:
            return current
        with contextlib.suppress(ZkNodeExists):
            self.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(0))
        current = self.read_controller_epoch()
        if current is None:
            raise ZkError("/controller_epoch vanished right after creation")
        return current

    def read_controller(self) -> int | None:
        """The id in /controller, or None when no controller is elected."""
        got = self.get_or_none(ControllerZNode.path)
        return ControllerZNode.decode(got[0]) if got is not None else None

    def try_register_controller(
        self, controller_id: int, timestamp_ms: int, new_epoch: int, epoch_zk_version: int
    ) -> int | None:
        """The election multi of reference §5.1: create /controller (ephemeral) and set
        /controller_epoch to `new_epoch` if it is still at `epoch_zk_version`.

        Returns the new zkVersion of /controller_epoch, or None if the multi failed because a
        controller exists or the epoch moved (the caller re-reads to see whether it was us).
        """
        tx = self._client.transaction()
        tx.create(
            ControllerZNode.path,
            ControllerZNode.encode(controller_id, timestamp_ms),
            ephemeral=True,
        )
        tx.set_data(
            ControllerEpochZNode.path,
            ControllerEpochZNode.encode(new_epoch),
            version=epoch_zk_version,
        )
        results = _call(tx.commit)
        failure = _first_failure(results)
        if failure is None:
            return int(results[1].version)
        if isinstance(failure, ZkNodeExists | ZkBadVersion):
            return None
        raise failure

    def update_partition_states(
        self, writes: Iterable[tuple[TopicPartition, LeaderAndIsr, int]]
    ) -> list[int | None]:
        """Leaders' conditional ISR writes (reference §2.7, ReplicationUtils.updateLeaderAndIsr),
        each (partition, state, expected zkVersion), pipelined: per write, in order, the new
        zkVersion, or None on conflict (NONODE, or BADVERSION with other content stored). A
        BADVERSION whose stored state equals ours counts as success: our own write, resent
        after a connection loss, which raises for the whole batch (resend it as it is)."""
        todo = list(writes)
        paths = [TopicPartitionStateZNode.path(tp) for tp, _state, _expected in todo]
        outcomes = self._pipelined(
            functools.partial(
                self._client.set_async, path, TopicPartitionStateZNode.encode(state), expected
            )
            for path, (_tp, state, expected) in zip(paths, todo, strict=True)
        )
        out: list[int | None] = []
        conflicts = []
        for i, outcome in enumerate(outcomes):
            if isinstance(outcome, kz_exc.BadVersionError):
                conflicts.append(i)
            elif isinstance(outcome, Exception) and not isinstance(outcome, kz_exc.NoNodeError):
                raise _mapped(outcome) from outcome
            out.append(None if isinstance(outcome, Exception) else int(outcome.version))
        stored = self.get_many([paths[i] for i in conflicts])
        for i in conflicts:
            got = stored[paths[i]]
            if got is not None:
                now = TopicPartitionStateZNode.decode(got[0], got[1].version)
                ours = todo[i][1]
                same = (now.leader, now.leader_epoch, now.isr, now.controller_epoch) == (
                    ours.leader,
                    ours.leader_epoch,
                    ours.isr,
                    ours.controller_epoch,
                )
                out[i] = now.zk_version if same else None
        return out

    def read_partition_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        got = self.get_or_none(TopicPartitionStateZNode.path(tp))
        return TopicPartitionStateZNode.decode(got[0], got[1].version) if got else None

    def read_partition_states(
        self, tps: Iterable[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        """The state znodes of `tps` that exist, read pipelined."""
        paths = {tp: TopicPartitionStateZNode.path(tp) for tp in tps}
        got = self.get_many(paths.values())
        out = {}
        for tp, path in paths.items():
            node = got[path]
            if node is not None:
                out[tp] = TopicPartitionStateZNode.decode(node[0], node[1].version)
        return out

    def create_isr_change_notification(self, partitions: Iterable[TopicPartition]) -> str:
        """One persistent sequential /isr_change_notification/isr_change_<seq> (reference §3.2)."""
        return self.create(
            IsrChangeNotificationSequenceZNode.path_prefix,
            IsrChangeNotificationSequenceZNode.encode(sorted(partitions)),
            sequential=True,
        )

    # ---- the controller's fenced writes (reference §1.1, §5.1) -------------------------------

    def _fenced_many(
        self, epoch_zk_version: int, add_ops: list[Callable[[Any], None]]
    ) -> list[ZkError | None]:
        """For each op one multi {check /controller_epoch at our version, <op>}, pipelined:
        None where it succeeded, the op's error otherwise. Each multi is checked on its
        own, as Kafka's batched controller writes are (reference §5.1, §5.5): the per-op
        outcomes in order; ControllerMoved if any check failed."""

        def start(add_op: Callable[[Any], None]) -> Any:
            tx = self._client.transaction()
            tx.check(ControllerEpochZNode.path, epoch_zk_version)
            add_op(tx)
            return tx.commit_async()

        errors: list[ZkError | None] = []
        for outcome in self._pipelined(functools.partial(start, op) for op in add_ops):
            if isinstance(outcome, Exception):
                raise _mapped(outcome) from outcome
            check = outcome[0]
            if isinstance(check, Exception) and not isinstance(check, kz_exc.RolledBackError):
                raise ControllerMoved(
                    f"/controller_epoch is no longer at version {epoch_zk_version}"
                )
            errors.append(_first_failure(outcome[1:]))
        return errors

    def _create_parents(self, paths: list[str]) -> None:
        """Create each znode (no data) unless it exists, pipelined."""
        for outcome in self._pipelined(
            functools.partial(self._client.create_async, p, b"") for p in paths
        ):
            if isinstance(outcome, Exception) and not isinstance(outcome, kz_exc.NodeExistsError):
                raise _mapped(outcome) from outcome

    def create_partition_states_fenced(
        self, epoch_zk_version: int, states: Mapping[TopicPartition, LeaderAndIsr]
    ) -> dict[TopicPartition, int | None]:
        """Create new partitions' state znodes (§1.5), pipelined, as Kafka's
        createTopicPartitionStatesRaw does: per partition its zkVersion (0), or None if it
        exists already. Parents are created first with no data, as Kafka does."""
        tps = list(states)
        self.ensure_paths(TopicPartitionsZNode.path(t) for t in sorted({tp.topic for tp in tps}))
        self._create_parents([TopicPartitionZNode.path(tp) for tp in tps])

        def create(tp: TopicPartition) -> Callable[[Any], None]:
            path = TopicPartitionStateZNode.path(tp)
            data = TopicPartitionStateZNode.encode(states[tp])
            return lambda tx: tx.create(path, data)

        out: dict[TopicPartition, int | None] = {}
        errors = self._fenced_many(epoch_zk_version, [create(tp) for tp in tps])
        for tp, error in zip(tps, errors, strict=True):
            if error is not None and not isinstance(error, ZkNodeExists):
                raise error
            out[tp] = 0 if error is None else None
        return out

    def set_partition_states_fenced(
        self,
        epoch_zk_version: int,
        writes: Iterable[tuple[TopicPartition, LeaderAndIsr, int]],
    ) -> dict[TopicPartition, int | None]:
        """The controller's conditional updates of state znodes, each (partition, new state,
        expected zkVersion), pipelined (Kafka's updateLeaderAndIsr): per partition the new
        zkVersion, or None on BADVERSION/NONODE (the caller re-reads and retries, §5.5)."""
        todo = list(writes)

        def set_data(tp: TopicPartition, state: LeaderAndIsr, expected: int) -> Any:
            path = TopicPartitionStateZNode.path(tp)
            data = TopicPartitionStateZNode.encode(state)
            return lambda tx: tx.set_data(path, data, version=expected)

        out: dict[TopicPartition, int | None] = {}
        errors = self._fenced_many(epoch_zk_version, [set_data(*w) for w in todo])
        for (tp, _state, expected), error in zip(todo, errors, strict=True):
            if error is not None and not isinstance(error, ZkBadVersion | ZkNoNode):
                raise error
            out[tp] = expected + 1 if error is None else None
        return out

    def delete_fenced(self, epoch_zk_version: int, path: str) -> bool:
        """Delete a znode (any version) under the fence; False if it was already gone."""
        return self.delete_many_fenced(epoch_zk_version, [path])[0]

    def delete_many_fenced(self, epoch_zk_version: int, paths: list[str]) -> list[bool]:
        """`delete_fenced` for each path, pipelined."""

        def delete(path: str) -> Callable[[Any], None]:
            return lambda tx: tx.delete(path)

        out = []
        for error in self._fenced_many(epoch_zk_version, [delete(p) for p in paths]):
            if error is not None and not isinstance(error, ZkNoNode):
                raise error
            out.append(error is None)
        return out

    # ---- watches -----------------------------------------------------------------------------

    def watch_data(self, path: str, callback: Callable[[bytes | None, Stat | None], None]) -> None:
        """Call `callback(data, stat)` now and whenever the znode changes, appears or goes away
        (data and stat are None while it does not exist). Survives session expiry."""

        def fn(data: bytes | None, stat: Any, _event: Any = None) -> None:
            callback(data, _stat(stat) if stat is not None else None)

        self._client.DataWatch(path, fn)

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
