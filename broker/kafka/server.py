"""The broker's Kafka listeners: an asyncio TCP server for each listener that speaks Kafka's
protocol (`minibroker.core.listeners.speaks_kafka`), on the broker's one event loop. Bound
early (so the port can be registered), serving once the broker is ready. SSL and SASL_SSL
listeners speak TLS (the handshake completes before a connection is served); on SASL ones a
connection passes the SASL gate first. Each connection gets its own context with its session:
the principal (SASL's, else the client certificate's, else User:ANONYMOUS) and address."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from broker.groups.coordinator import GroupCoordinator
from broker.kafka.connection import KafkaConnection
from broker.kafka.context import KafkaContext
from broker.kafka.handlers_meta import api_versions
from broker.kafka.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager
from broker.security.authorizer import Session
from broker.security.sasl_gate import SaslGate
from broker.security.setup import BrokerSecurity
from broker.transactions.coordinator import TransactionCoordinator
from broker.transactions.verification import TxnVerifier
from minibroker.core.listeners import Endpoint
from minibroker.core.security.principal_mapping import NoMatchingRule
from minibroker.runtime import logging as slog
from minibroker.security.tls import peer_dn


class KafkaServers:
    def __init__(self, security: BrokerSecurity) -> None:
        self.security = security
        self._servers: dict[str, asyncio.Server] = {}
        self._contexts: dict[str, KafkaContext] = {}
        self._connections: set[asyncio.Task[None]] = set()
        self._max_request_bytes = 0
        self._idle_s = 0.0
        self._groups: GroupCoordinator | None = None
        self._txns: TransactionCoordinator | None = None

    @property
    def transactions(self) -> TransactionCoordinator | None:
        """This broker's transaction coordinator, once started."""
        return self._txns

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
                peer = writer.get_extra_info("peername")
                host = str(peer[0]) if isinstance(peer, tuple) else ""
                try:
                    principal = self.security.certificate_principal(
                        peer_dn(writer.get_extra_info("ssl_object"))
                    )
                except NoMatchingRule as exc:
                    slog.event(
                        "authentication_failed", logging.INFO, listener=listener, peer=host,
                        mechanism="SSL", reason=str(exc),
                    )  # fmt: skip
                    writer.close()
                    return
                ctx = dataclasses.replace(ctx, session=Session(principal, host))
                connection = KafkaConnection(
                    ctx, reader, writer, self._max_request_bytes, self._idle_s,
                    self._gate(listener, ctx),
                )  # fmt: skip
                await connection.serve()
            finally:
                self._connections.discard(task)

        try:
            server = await asyncio.start_server(
                on_connect,
                endpoint.host,
                endpoint.port,
                start_serving=False,
                ssl=self.security.tls.get(listener),
                ssl_handshake_timeout=10.0 if listener in self.security.tls else None,
            )
        except OSError:
            return 0
        self._servers[listener] = server
        return int(server.sockets[0].getsockname()[1])

    def _gate(self, listener: str, ctx: KafkaContext) -> SaslGate | None:
        if not self.security.sasl(listener) or self.security.credentials is None:
            return None
        return SaslGate(
            self.security.mechanisms, self.security.credentials, api_versions, listener,
            f"{ctx.session.host}",
        )  # fmt: skip

    async def start(self, rm: ReplicaManager, cluster_id: str) -> None:
        """The coordinators and each listener's context, before the broker registers (a
        LeaderAndIsr for their topics may follow at once); `serve` then accepts clients."""
        settings = rm.settings
        self._max_request_bytes = settings.get_int("socket.request.max.bytes")
        self._idle_s = settings.get_int("connections.max.idle.ms") / 1000
        producer_ids = ProducerIdManager(rm.store, rm.broker_id)
        self._groups = GroupCoordinator(rm)
        self._groups.start()
        self._txns = TransactionCoordinator(rm, producer_ids.next_producer_id)
        self._txns.start()
        if settings.get_bool("transaction.partition.verification.enable"):
            # KIP-890 part 1; its channels are the coordinator's, closed with it.
            rm.appends.verify = TxnVerifier(rm, self._txns).verify
        for listener in self._servers:
            self._contexts[listener] = KafkaContext(
                rm, listener, cluster_id, producer_ids, self._groups, self._txns,
                self.security.authorizer,
            )  # fmt: skip

    async def serve(self) -> None:
        """Accept Kafka clients: once the broker is registered, as Kafka 2.6's KafkaServer
        starts processing requests only after registerBroker (its socket server started with
        startProcessingRequests = false until the end of startup). Before that its metadata
        cache is empty: a client asking it would hear its topics do not exist (a restarted
        broker waits up to a session timeout for its previous registration to expire, and a
        consumer told UNKNOWN_TOPIC_OR_PARTITION then stopped fetching for longer)."""
        for server in self._servers.values():
            await server.start_serving()

    async def stop(self) -> None:
        for server in self._servers.values():
            server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        if self._groups is not None:
            await self._groups.stop()
        if self._txns is not None:
            await self._txns.stop()
        for server in self._servers.values():
            await server.wait_closed()
