"""The broker's Kafka listeners: an asyncio TCP server for each listener that speaks Kafka's
protocol (`minibroker.core.listeners.speaks_kafka`), on the broker's one event loop. Bound
early (so the port can be registered), serving once the broker is ready."""

from __future__ import annotations

import asyncio

from broker.groups.coordinator import GroupCoordinator
from broker.kafka.connection import KafkaConnection
from broker.kafka.context import KafkaContext
from broker.kafka.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager
from minibroker.core.listeners import Endpoint


class KafkaServers:
    def __init__(self) -> None:
        self._servers: dict[str, asyncio.Server] = {}
        self._contexts: dict[str, KafkaContext] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self._max_request_bytes = 0
        self._idle_s = 0.0
        self._groups: GroupCoordinator | None = None

    async def listen(self, endpoint: Endpoint) -> int:
        """Bind `endpoint`; the port bound (0 if it cannot be)."""
        listener = endpoint.listener

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            ctx = self._contexts.get(listener)
            task = asyncio.current_task()
            if ctx is None or task is None:
                writer.close()
                return
            self._connections.add(task)
            try:
                connection = KafkaConnection(
                    ctx, reader, writer, self._max_request_bytes, self._idle_s
                )
                await connection.serve()
            finally:
                self._connections.discard(task)

        try:
            server = await asyncio.start_server(
                on_connect, endpoint.host, endpoint.port, start_serving=False
            )
        except OSError:
            return 0
        self._servers[listener] = server
        return int(server.sockets[0].getsockname()[1])

    async def start(self, rm: ReplicaManager, cluster_id: str) -> None:
        settings = rm.settings
        self._max_request_bytes = settings.get_int("socket.request.max.bytes")
        self._idle_s = settings.get_int("connections.max.idle.ms") / 1000
        producer_ids = ProducerIdManager(rm.store, rm.broker_id)
        self._groups = GroupCoordinator(rm)
        self._groups.start()
        for listener, server in self._servers.items():
            self._contexts[listener] = KafkaContext(
                rm, listener, cluster_id, producer_ids, self._groups
            )
            await server.start_serving()

    async def stop(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._groups is not None:
            await self._groups.stop()
        for server in self._servers.values():
            await server.wait_closed()
