"""The controller's single event loop (Kafka's ControllerEventManager), election part.

ZooKeeper watches and session changes only enqueue events; one task processes them one at a
time, reading ZooKeeper afresh and asking controller.logic what to do.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from controller.logic.election import (
    ActiveEpoch,
    Role,
    attempt_was_ours,
    must_resign,
    next_epoch,
    should_try_election,
)
from minibroker.core.zk_layout import PERSISTENT_PATHS, ControllerZNode
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_store import SessionState, Stat, ZkError, ZkStore


@dataclass(frozen=True)
class Startup:
    pass


@dataclass(frozen=True)
class ControllerChange:
    """/controller was created, changed or deleted (controller_id None = deleted)."""

    controller_id: int | None


@dataclass(frozen=True)
class Expire:
    """Our ZooKeeper session expired: its ephemeral /controller (if ours) is gone."""


@dataclass(frozen=True)
class Reconnected:
    """A new session after an expiry: stand for election again."""


ControllerEvent = Startup | ControllerChange | Expire | Reconnected


class ControllerEventLoop:
    def __init__(
        self,
        store: ZkStore,
        controller_id: int,
        on_role: Callable[[Role], Awaitable[None]],
    ) -> None:
        self._store = store
        self.controller_id = controller_id
        self._on_role = on_role
        self._queue: asyncio.Queue[ControllerEvent] = asyncio.Queue()
        self._loop = asyncio.get_running_loop()
        self.role = Role.STANDBY
        self.active: ActiveEpoch | None = None
        self._session_lost = False
        self._closing = False

    # ---- producers of events (any thread) ----------------------------------------------------

    def _enqueue_threadsafe(self, event: ControllerEvent) -> None:
        self._loop.call_soon_threadsafe(self._queue.put_nowait, event)

    def _on_controller_znode(self, data: bytes | None, _stat: Stat | None) -> None:
        controller_id = ControllerZNode.decode(data) if data else None
        self._enqueue_threadsafe(ControllerChange(controller_id))

    def _on_session(self, state: SessionState) -> None:
        if self._closing:
            return
        if state is SessionState.LOST:
            self._session_lost = True
            self._enqueue_threadsafe(Expire())
        elif state is SessionState.CONNECTED and self._session_lost:
            self._session_lost = False
            self._enqueue_threadsafe(Reconnected())

    # ---- the loop ----------------------------------------------------------------------------

    async def run(self) -> None:
        self._store.add_state_listener(self._on_session)
        await asyncio.to_thread(self._store.ensure_paths, PERSISTENT_PATHS)
        self._queue.put_nowait(Startup())
        await asyncio.to_thread(
            self._store.watch_data, ControllerZNode.path, self._on_controller_znode
        )
        while True:
            event = await self._queue.get()
            try:
                await self._process(event)
            except ZkError as exc:
                # Connection trouble mid-event: the session listener will enqueue what follows.
                slog.event(
                    "controller_event_failed",
                    logging.WARNING,
                    event_type=type(event).__name__,
                    error=str(exc),
                )

    def close(self) -> None:
        self._closing = True

    async def _process(self, event: ControllerEvent) -> None:
        if isinstance(event, Expire):
            await self._resign("zk_session_expired")
            return
        current = await asyncio.to_thread(self._store.read_controller)
        if must_resign(self.role, self.controller_id, current):
            await self._resign("controller_moved", new_controller=current)
        if self.role is Role.STANDBY and should_try_election(current):
            await self._elect()
        elif self.role is Role.STANDBY and isinstance(event, Startup | Reconnected):
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
        slog.event(
            "controller_elected",
            controller_id=self.controller_id,
            epoch=attempted,
            epoch_zk_version=new_zk_version,
        )
        await self._on_role(Role.ACTIVE)

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
        await self._on_role(Role.STANDBY)
