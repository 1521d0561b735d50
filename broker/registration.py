"""Keeps /brokers/ids/<id> registered for the life of the process (reference §1.3).

Registers at start; when the ZooKeeper session expires the znode is gone, so on the next
connection it registers again, with a new broker epoch (the new znode's czxid).
kazoo reports session states on its own thread; they are handed to the loop here.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from minibroker.core.zk_layout import PERSISTENT_PATHS, BrokerIdZNode, BrokerRegistration
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_store import BrokerIdAlreadyRegistered, SessionState, ZkError, ZkStore

NOT_REGISTERED = -1


class BrokerRegistrar:
    def __init__(
        self,
        store: ZkStore,
        registration: Callable[[], BrokerRegistration],
        on_epoch: Callable[[int], None],
    ) -> None:
        self._store = store
        self._registration = registration
        self._on_epoch = on_epoch
        self._loop = asyncio.get_running_loop()
        self._session_lost = False
        self._registered_session: int | None = None
        self.broker_epoch = NOT_REGISTERED
        self._retry_task: asyncio.Task[None] | None = None
        self._closing = False

    async def start(self) -> None:
        """Register for the first time.

        Deliberate difference from Kafka: a znode held by another session (typically this
        broker's previous incarnation, SIGKILLed moments ago) makes Kafka's start-up fail; here
        the broker waits up to one session timeout (+2 s) for that session to expire, so
        `cluster restart` after `cluster kill` works like a supervisor's restart would.
        """
        self._store.add_state_listener(self._on_state_threadsafe)
        await asyncio.to_thread(self._store.ensure_paths, PERSISTENT_PATHS)
        deadline = self._loop.time() + (self._store.session_timeout_ms + 2000) / 1000
        while True:
            try:
                await self.register()
                return
            except BrokerIdAlreadyRegistered as exc:
                if self._loop.time() > deadline:
                    raise
                slog.event("broker_id_held_by_other_session", logging.WARNING, error=str(exc))
                await asyncio.sleep(0.25)

    async def register(self) -> None:
        reg = self._registration()
        epoch = await asyncio.to_thread(
            self._store.register_broker,
            reg.broker_id,
            BrokerIdZNode.encode(reg),
            previous_session_id=self._registered_session,
        )
        self._registered_session = self._store.session_id
        self._set_epoch(epoch)
        slog.event(
            "broker_registered",
            broker_id=reg.broker_id,
            broker_epoch=epoch,
            endpoints=list(reg.endpoints),
            session_id=f"{self._registered_session or 0:#x}",
        )

    def _set_epoch(self, epoch: int) -> None:
        self.broker_epoch = epoch
        self._on_epoch(epoch)

    def _on_state_threadsafe(self, state: SessionState) -> None:
        self._loop.call_soon_threadsafe(self._on_state, state)

    def close(self) -> None:
        """Stop reacting to session events: closing our own session is not an expiry."""
        self._closing = True
        if self._retry_task is not None:
            self._retry_task.cancel()

    def _on_state(self, state: SessionState) -> None:
        if self._closing:
            return
        if state is SessionState.SUSPENDED:
            slog.event("zk_disconnected", logging.WARNING)
        elif state is SessionState.LOST:
            self._session_lost = True
            self._set_epoch(NOT_REGISTERED)
            slog.event(
                "zk_session_expired",
                logging.WARNING,
                session_id=f"{self._registered_session or 0:#x}",
            )
        elif state is SessionState.CONNECTED:
            slog.event("zk_connected", session_id=f"{self._store.session_id or 0:#x}")
            if self._session_lost and (self._retry_task is None or self._retry_task.done()):
                self._session_lost = False
                self._retry_task = self._loop.create_task(self._reregister())

    async def _reregister(self) -> None:
        # A new session: the old ephemeral znode is gone (or about to be, KAFKA-7165).
        delay = 0.1
        while True:
            try:
                await self.register()
                return
            except ZkError as exc:
                slog.event("broker_register_failed", logging.WARNING, error=str(exc))
                await asyncio.sleep(delay)
                delay = min(delay * 2, 2.0)
