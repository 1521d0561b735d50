"""A live copy of what ZooKeeper says about the cluster, kept by watches (no polling): brokers,
the controller and its epoch, the controllers' endpoints, topics, their configs and every
partition's state. kazoo calls back on its own thread; every change is handed to the asyncio
loop (`call_soon_threadsafe`), which alone touches the copy, and `on_change` is called there:
with "topic-p" when only that partition's state changed, None for anything else.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from minibroker.client.admin_zk import TopicInfo
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerRegistration,
    ConfigEntityZNode,
    ControllerEndpointZNode,
    ControllerEpochZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    TopicsZNode,
    TopicZNode,
    ZNodeFormatError,
)
from minibroker.runtime.zk_errors import SessionState, Stat, ZkError
from minibroker.runtime.zk_store import ZkStore

log = logging.getLogger(__name__)
RETRY_S = 2.0


@dataclass
class ZkCopy:
    """The copy the loop reads. Broker epochs are the registrations' czxid, as Kafka's."""

    connected: bool = False
    error: str = ""
    brokers: dict[int, tuple[BrokerRegistration, int]] = field(default_factory=dict)
    controller: int | None = None
    controller_epoch: int | None = None
    controllers: dict[int, tuple[str, ...]] = field(default_factory=dict)
    assignments: dict[str, dict[int, tuple[int, ...]]] = field(default_factory=dict)
    # Reassignments in flight: topic -> (adding, removing) replicas by partition.
    moving: dict[str, tuple[dict[int, tuple[int, ...]], dict[int, tuple[int, ...]]]] = field(
        default_factory=dict
    )
    configs: dict[str, dict[str, str]] = field(default_factory=dict)
    states: dict[str, dict[int, LeaderAndIsr]] = field(default_factory=dict)  # by topic

    def topics(self) -> list[TopicInfo]:
        return [
            TopicInfo(
                topic,
                assignment,
                self.configs.get(topic, {}),
                self.states.get(topic, {}),
                adding=self.moving.get(topic, ({}, {}))[0],
                removing=self.moving.get(topic, ({}, {}))[1],
            )  # fmt: skip
            for topic, assignment in sorted(self.assignments.items())
        ]

    def set_state(self, tp: TopicPartition, state: LeaderAndIsr | None) -> None:
        if state is not None:
            self.states.setdefault(tp.topic, {})[tp.partition] = state
        else:
            self.states.get(tp.topic, {}).pop(tp.partition, None)


class ZkMirror:
    """Keeps a ZkCopy of `zk_connect` up to date until `close()`; connects (and reconnects
    after a failed start) by itself, saying why in `copy.error` meanwhile."""

    def __init__(self, zk_connect: str, on_change: Callable[[str | None], None]) -> None:
        self.zk_connect = zk_connect
        self.copy = ZkCopy()
        self._on_change = on_change
        self._loop: asyncio.AbstractEventLoop | None = None
        self._zk: ZkStore | None = None
        self._watched: set[str] = set()
        self._closed = False

    async def run(self) -> None:
        """Connect, retrying every RETRY_S until it works; the watches then keep the copy."""
        self._loop = asyncio.get_running_loop()
        while not self._closed:
            zk = ZkStore(self.zk_connect, session_timeout_ms=10_000, connection_timeout_ms=3_000)
            try:
                await asyncio.to_thread(zk.start)
            except ZkError as exc:
                self._set(error=str(exc), connected=False)
                await asyncio.sleep(RETRY_S)
                continue
            self._zk = zk
            zk.add_state_listener(self._on_session)
            self._set(error="", connected=True)
            await asyncio.to_thread(self._watch_roots, zk)
            return

    def close(self) -> None:
        self._closed = True
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()

    # ---- on kazoo's threads: decode, then hand to the loop -----------------------------------

    def _post(self, apply: Callable[[ZkCopy], object], partition: str | None = None) -> None:
        """Hand `apply` to the loop; `partition` ("topic-p") when only that one changed."""
        if self._loop is None or self._closed:
            return
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            self._loop.call_soon_threadsafe(self._apply, apply, partition)

    def _set(self, **values: Any) -> None:
        """On the loop: set fields of the copy now."""
        self._apply(lambda c: c.__dict__.update(values))

    def _apply(self, apply: Callable[[ZkCopy], object], partition: str | None = None) -> None:
        apply(self.copy)
        self._on_change(partition)

    def _on_session(self, state: SessionState) -> None:
        connected = state is SessionState.CONNECTED
        error = (
            "" if connected else f"lost the ZooKeeper session to {self.zk_connect} ({state.name})"
        )
        self._post(lambda c: c.__dict__.update(connected=connected, error=error))

    def _watch_data_once(
        self, zk: ZkStore, path: str, callback: Callable[[bytes | None, Stat | None], None]
    ) -> None:
        # One watch per path for the mirror's life: a data watch outlives its znode (it fires
        # again when the znode comes back), so a broker that re-registers is seen by it.
        if path not in self._watched:
            self._watched.add(path)
            zk.watch_data(path, callback)

    def _watch_roots(self, zk: ZkStore) -> None:
        zk.watch_data(ControllerZNode.path, self._on_controller)
        zk.watch_data(ControllerEpochZNode.path, self._on_controller_epoch)
        for path, on_children in (
            (BrokerIdsZNode.path, self._on_broker_ids),
            (TopicsZNode.path, self._on_topics),
            (ControllerEndpointZNode.root, self._on_controller_ids),
        ):
            # A children watch needs its parent: wait for it to exist (a fresh cluster).
            def exists(
                data: bytes | None, stat: Stat | None, path: str = path, f: Any = on_children
            ) -> None:
                if stat is not None and path not in self._watched:
                    self._watched.add(path)
                    zk.watch_children(path, f)

            zk.watch_data(path, exists)

    def _on_controller(self, data: bytes | None, _stat: Stat | None) -> None:
        value = _decoded(lambda: ControllerZNode.decode(data)) if data is not None else None
        self._post(lambda c: setattr(c, "controller", value))

    def _on_controller_epoch(self, data: bytes | None, _stat: Stat | None) -> None:
        value = _decoded(lambda: ControllerEpochZNode.decode(data)) if data is not None else None
        self._post(lambda c: setattr(c, "controller_epoch", value))

    def _on_broker_ids(self, children: list[str]) -> None:
        ids = {int(c) for c in children if c.isdigit()}
        self._post(lambda c: _keep_only(c.brokers, ids))
        zk = self._zk
        assert zk is not None
        for broker_id in ids:
            path = BrokerIdZNode.path(broker_id)

            def on_data(data: bytes | None, stat: Stat | None, b: int = broker_id) -> None:
                reg = _decoded(lambda: BrokerIdZNode.decode(b, data)) if data is not None else None
                if reg is None or stat is None:
                    self._post(lambda c: c.brokers.pop(b, None))
                    return
                self._post(lambda c: c.brokers.__setitem__(b, (reg, stat.czxid)))

            self._watch_data_once(zk, path, on_data)

    def _on_controller_ids(self, children: list[str]) -> None:
        ids = {int(c) for c in children if c.isdigit()}
        self._post(lambda c: _keep_only(c.controllers, ids))
        zk = self._zk
        assert zk is not None
        for cid in ids:
            path = ControllerEndpointZNode.path(cid)

            def on_data(data: bytes | None, stat: Stat | None, i: int = cid) -> None:
                eps = _decoded(lambda: ControllerEndpointZNode.decode(data)) if data else None
                if eps is None:
                    self._post(lambda c: c.controllers.pop(i, None))
                    return
                self._post(lambda c: c.controllers.__setitem__(i, eps))

            self._watch_data_once(zk, path, on_data)

    def _on_topics(self, children: list[str]) -> None:
        names = set(children)
        self._post(lambda c: _drop_topics(c, names))
        zk = self._zk
        assert zk is not None
        for topic in names:
            self._watch_data_once(zk, TopicZNode.path(topic), self._assignment_watcher(topic))
            path = ConfigEntityZNode.path("topics", topic)

            def on_config(data: bytes | None, _s: Stat | None, t: str = topic) -> None:
                cfg = _decoded(lambda: ConfigEntityZNode.decode(data)) if data else None
                self._post(lambda c: c.configs.__setitem__(t, cfg or {}))

            self._watch_data_once(zk, path, on_config)

    def _assignment_watcher(self, topic: str) -> Callable[[bytes | None, Stat | None], None]:
        def on_data(data: bytes | None, _stat: Stat | None) -> None:
            zk = self._zk
            assert zk is not None
            if data is None:
                self._post(lambda c: (c.assignments.pop(topic, None), c.moving.pop(topic, None)))
                return
            got = _decoded(lambda: TopicZNode.decode(topic, data))
            if got is None:
                return
            assignment = dict(sorted(got.partitions.items()))
            moving = (dict(got.adding_replicas), dict(got.removing_replicas))

            def store(c: ZkCopy) -> None:
                c.assignments[topic] = assignment
                c.moving[topic] = moving

            self._post(store)
            for p in assignment:
                tp = TopicPartition(topic, p)
                path = TopicPartitionStateZNode.path(tp)
                if path not in self._watched:
                    self._watched.add(path)
                    zk.watch_data_pipelined(path, self._state_watcher(tp))

        return on_data

    def _state_watcher(self, tp: TopicPartition) -> Callable[[bytes | None, Stat | None], None]:
        key = f"{tp.topic}-{tp.partition}"

        def on_data(data: bytes | None, stat: Stat | None) -> None:
            if data is None or stat is None:
                self._post(lambda c: c.set_state(tp, None), key)
                return
            state = _decoded(lambda: TopicPartitionStateZNode.decode(data, stat.version))
            if state is not None:
                self._post(lambda c: c.set_state(tp, state), key)

        return on_data


def _decoded(decode: Callable[[], Any]) -> Any:
    try:
        return decode()
    except (ZNodeFormatError, ValueError) as exc:
        log.warning("unreadable znode: %s", exc)
        return None


def _keep_only(d: dict[int, Any], ids: set[int]) -> None:
    for k in [k for k in d if k not in ids]:
        del d[k]


def _drop_topics(c: ZkCopy, names: set[str]) -> None:
    for topic in [t for t in c.assignments if t not in names]:
        del c.assignments[topic]
        c.moving.pop(topic, None)
        c.configs.pop(topic, None)
        c.states.pop(topic, None)
