"""The controller's single event loop (Kafka's ControllerEventManager).

ZooKeeper watches, session changes, timers and RPCs only enqueue events; one task processes
them one at a time. Election and resignation follow reference §5.1; everything the active
controller does per event is in controller.operations. A fenced write that finds a newer
controller epoch (ControllerMoved) makes this controller resign at once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from controller.broker_channels import ChannelManager
from controller.logic.election import (
    ActiveEpoch,
    Role,
    attempt_was_ours,
    must_resign,
    next_epoch,
    should_try_election,
)
from controller.metrics import ControllerMetrics
from controller.operations import ControllerOps
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import (
    PERSISTENT_PATHS,
    BrokerIdsZNode,
    ControllerZNode,
    DeleteTopicsZNode,
    IsrChangeNotificationZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicsZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ControllerMoved, SessionState, Stat, ZkError, ZkStore


@dataclass(frozen=True)
class Event:
    name: str
    controller_id: int | None = None  # for ControllerChange
    enqueued: float = field(default_factory=time.monotonic)
    payload: Any = None  # the topic, partition or request the event is about
    # An RPC's answer: set by the handler, or to (NOT_CONTROLLER | UNKNOWN_SERVER_ERROR, ...)
    # when this controller is not active or the handler failed.
    reply: asyncio.Future[Any] | None = None


@dataclass(frozen=True)
class ControlledShutdown(Event):
    broker_id: int = -1
    broker_epoch: int = -1
    reply: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] | None = None


# Events only the active controller acts on (ControllerOps.handlers names their operation).
ACTIVE_EVENTS = (
    "BrokerChange",
    "TopicChange",
    "IsrChangeNotification",
    "PreferredReplicaElection",
    "AutoPreferredReplicaLeaderElection",
    "PartitionModifications",
    "TopicDeletion",
    "ZkPartitionReassignment",
    "PartitionReassignmentIsrChange",
    "TopicDeletionStopReplicaResponseReceived",
    "AlterPartitionReassignments",
    "ListPartitionReassignments",
    "ElectLeaders",
)


class ControllerEventLoop:
    def __init__(
        self,
        store: ZkStore,
        settings: Settings,
        controller_id: int,
        on_role: Callable[[Role], Awaitable[None]],
        metrics: ControllerMetrics,
    ) -> None:
        self._store = store
        self.settings = settings
        self.controller_id = controller_id
        self._on_role = on_role
        self.metrics = metrics
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.role = Role.STANDBY
        self.active: ActiveEpoch | None = None
        self._session_lost = False
        self._closing = False
        self.channels = ChannelManager(controller_id)
        self.ops = ControllerOps(store, settings, controller_id, self.channels, metrics)
        # The operations queue follow-up events (a StopReplica answer, a watched znode).
        self.ops.post = lambda name, payload=None: self.enqueue(Event(name, payload=payload))
        self.ops.post_threadsafe = lambda name, payload=None: self._enqueue_threadsafe(
            Event(name, payload=payload)
        )
        self._rebalance: asyncio.Task[None] | None = None

    # ---- producers of events (any thread) ----------------------------------------------------

    def enqueue(self, event: Event) -> None:
        self._queue.put_nowait(event)
        self.metrics.queue_size.set(self._queue.qsize())

    def _enqueue_threadsafe(self, event: Event) -> None:
        self._loop.call_soon_threadsafe(self.enqueue, event)

    def _on_controller_znode(self, data: bytes | None, _stat: Stat | None) -> None:
        controller_id = ControllerZNode.decode(data) if data else None
        self._enqueue_threadsafe(Event("ControllerChange", controller_id))

    def _on_session(self, state: SessionState) -> None:
        if self._closing:
            return
        if state is SessionState.LOST:
            self._session_lost = True
            self._enqueue_threadsafe(Event("Expire"))
        elif state is SessionState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._enqueue_threadsafe(Event("Reconnected"))

    def _watch_children(self, path: str, name: str) -> None:
        self._store.watch_children(path, lambda _children: self._enqueue_threadsafe(Event(name)))

    def _watch_exists(self, path: str, name: str, *, creation_only: bool = False) -> None:
        """An event whenever the znode exists after a change (or, with `creation_only`, only
        when it appears: Kafka's handlers of /admin/reassign_partitions react to creation)."""
        existed: list[bool | None] = [None]  # unknown until kazoo's first call

        def fired(data: bytes | None, stat: Stat | None) -> None:
            # With creation_only, the first call (at registration) is the baseline: a znode
            # that exists then is the failover's to process (initializePartitionReassignments).
            baseline = creation_only and existed[0] is None
            if stat is not None and not baseline and not (creation_only and existed[0]):
                self._enqueue_threadsafe(Event(name))
            existed[0] = stat is not None

        self._store.watch_data(path, fired)

    async def request(self, name: str, payload: Any) -> Any:
        """An admin RPC (AlterPartitionReassignments, ListPartitionReassignments,
        ElectLeaders): queued like every other event; (NOT_CONTROLLER, None) unless active."""
        if self.role is not Role.ACTIVE:
            return ErrorCode.NOT_CONTROLLER, None
        reply: asyncio.Future[Any] = self._loop.create_future()
        self.enqueue(Event(name, None, time.monotonic(), payload, reply))
        return await reply

    async def controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        """The ControlledShutdown RPC: queued like every other event (reference §5.8)."""
        if self.role is not Role.ACTIVE:
            return ErrorCode.NOT_CONTROLLER, []
        reply: asyncio.Future[tuple[ErrorCode, list[TopicPartition]]] = self._loop.create_future()
        self.enqueue(
            ControlledShutdown(
                "ControlledShutdown", broker_id=broker_id, broker_epoch=broker_epoch, reply=reply
            )
        )
        return await reply

    # ---- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        self._store.add_state_listener(self._on_session)
        await asyncio.to_thread(self._store.ensure_paths, PERSISTENT_PATHS)
        self.enqueue(Event("Startup"))

        def register_watches() -> None:
            # Registered once; kazoo re-arms them after a session expiry. Handlers act only
            # while this controller is active (Kafka registers them in onControllerFailover).
            self._store.watch_data(ControllerZNode.path, self._on_controller_znode)
            self._watch_children(BrokerIdsZNode.path, "BrokerChange")
            self._watch_children(TopicsZNode.path, "TopicChange")
            self._watch_children(IsrChangeNotificationZNode.path, "IsrChangeNotification")
            self._watch_exists(PreferredReplicaElectionZNode.path, "PreferredReplicaElection")
            self._watch_children(DeleteTopicsZNode.path, "TopicDeletion")
            self._watch_exists(
                ReassignPartitionsZNode.path, "ZkPartitionReassignment", creation_only=True
            )

        await asyncio.to_thread(register_watches)
        while True:
            event = await self._queue.get()
            self.metrics.queue_size.set(self._queue.qsize())
            self.metrics.queue_time.observe((time.monotonic() - event.enqueued) * 1000)
            try:
                await self._process(event)
            except ControllerMoved as exc:
                await self._resign("controller_moved", error=str(exc))
                self._answer(event, ErrorCode.NOT_CONTROLLER)
            except ZkError as exc:
                # Connection trouble mid-event: the session listener enqueues what follows.
                slog.event(
                    "controller_event_failed",
                    logging.WARNING,
                    event_type=event.name,
                    error=str(exc),
                )
                self._answer(event, ErrorCode.UNKNOWN_SERVER_ERROR)
            except Exception as exc:  # an event must never kill the controller
                slog.event(
                    "controller_event_failed",
                    logging.ERROR,
                    event_type=event.name,
                    error=repr(exc),
                    exc_info=True,
                )
                self._answer(event, ErrorCode.UNKNOWN_SERVER_ERROR)

    @staticmethod
    def _answer(event: Event, code: ErrorCode) -> None:
        if event.reply is not None and not event.reply.done():
            event.reply.set_result((code, [] if isinstance(event, ControlledShutdown) else None))

    def close(self) -> None:
        self._closing = True

    async def shutdown(self) -> None:
        if self._rebalance is not None:
            self._rebalance.cancel()
        await self.channels.close_all()

    async def _process(self, event: Event) -> None:
        if event.name == "Expire":
            await self._resign("zk_session_expired")
            return
        if isinstance(event, ControlledShutdown):
            result: tuple[ErrorCode, list[TopicPartition]] = (ErrorCode.NOT_CONTROLLER, [])
            if self.role is Role.ACTIVE:
                result = await self.ops.on_controlled_shutdown(event.broker_id, event.broker_epoch)
            if event.reply is not None and not event.reply.done():
                event.reply.set_result(result)
            return
        if event.name in ACTIVE_EVENTS:
            if self.role is Role.ACTIVE:
                result = await self.ops.handle(event.name, event.payload)
                if event.reply is not None and not event.reply.done():
                    event.reply.set_result(result)
            else:
                self._answer(event, ErrorCode.NOT_CONTROLLER)
            return
        # Startup, ControllerChange, Reconnected: Kafka's elect() / maybeResign().
        current = await asyncio.to_thread(self._store.read_controller)
        if must_resign(self.role, self.controller_id, current):
            await self._resign("controller_moved", new_controller=current)
        if self.role is Role.STANDBY and should_try_election(current):
            await self._elect()
        elif self.role is Role.STANDBY and event.name in ("Startup", "Reconnected"):
            slog.event(
                "controller_standby",
                controller_id=self.controller_id,
                active=current,
                reason="controller_exists",
            )

    async def _elect(self) -> None:
        epoch, epoch_zk_version = await asyncio.to_thread(self._store.ensure_controller_epoch)
        attempted = next_epoch(epoch)
        new_zk_version = await asyncio.to_thread(
            self._store.try_register_controller,
            self.controller_id,
            now_ms(),
            attempted,
            epoch_zk_version,
        )
        if new_zk_version is None:
            current = await asyncio.to_thread(self._store.read_controller)
            now_epoch = await asyncio.to_thread(self._store.read_controller_epoch)
            epoch_in_zk = now_epoch[0] if now_epoch else None
            if not attempt_was_ours(self.controller_id, attempted, current, epoch_in_zk):
                slog.event(
                    "controller_standby",
                    controller_id=self.controller_id,
                    active=current,
                    epoch=epoch_in_zk,
                    reason="lost_election",
                )
                return
            assert now_epoch is not None
            new_zk_version = now_epoch[1]
        self.role = Role.ACTIVE
        self.active = ActiveEpoch(attempted, new_zk_version)
        self.metrics.active.set(1)
        slog.event(
            "controller_elected",
            controller_id=self.controller_id,
            epoch=attempted,
            epoch_zk_version=new_zk_version,
        )
        await self._on_role(Role.ACTIVE)
        await self.ops.on_failover(attempted, new_zk_version)
        self._start_rebalance_timer()
        slog.event(
            "controller_failover_complete", controller_id=self.controller_id, epoch=attempted
        )

    def _start_rebalance_timer(self) -> None:
        if not self.settings.get_bool("auto.leader.rebalance.enable"):
            return
        period_s = self.settings.get_int("leader.imbalance.check.interval.seconds")

        async def tick() -> None:
            await asyncio.sleep(5)  # Kafka's first check comes 5 s after failover
            while True:
                self.enqueue(Event("AutoPreferredReplicaLeaderElection"))
                await asyncio.sleep(period_s)

        self._rebalance = asyncio.ensure_future(tick())

    async def _resign(self, reason: str, **fields: Any) -> None:
        if self.role is not Role.ACTIVE:
            return
        slog.event(
            "controller_resigned",
            logging.WARNING,
            controller_id=self.controller_id,
            epoch=self.active.epoch if self.active else None,
            reason=reason,
            **fields,
        )
        self.role = Role.STANDBY
        self.active = None
        self.metrics.active.set(0)
        if self._rebalance is not None:
            self._rebalance.cancel()
            self._rebalance = None
        await self.channels.close_all()  # stop sending at once
        await self._on_role(Role.STANDBY)
