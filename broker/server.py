"""The broker process shell: gRPC server (Broker + Control services, standard health), the
ZooKeeper session and registration, the replica manager and its metrics.

Health reports SERVING only while the broker is registered in ZooKeeper.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from collections.abc import Awaitable
from pathlib import Path

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from broker.control_servicer import ControlServicer
from broker.controlled_shutdown import controlled_shutdown
from broker.dynamic_config import DynamicConfigManager
from broker.kafka.server import KafkaServers
from broker.metadata_dir import InconsistentBrokerId, prepare_log_dir
from broker.metrics import BrokerMetrics
from broker.registration import NOT_REGISTERED, BrokerRegistrar
from broker.replica_manager import ReplicaManager
from broker.security.setup import BrokerSecurity, SecurityConfigError
from broker.servicers import BrokerServicer
from broker.transactions.marker_servicer import TxnMarkersServicer
from broker.transactions.verification import TxnVerificationServicer
from minibroker.core.listeners import (
    ListenerError,
    advertised_endpoints,
    parse_listeners,
    security_protocol_map,
    speaks_kafka,
)
from minibroker.core.zk_layout import BrokerRegistration, ClusterIdZNode
from minibroker.rpc import broker_pb2_grpc, control_pb2_grpc, events_pb2_grpc, txn_pb2_grpc
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.event_service import EventsServicer
from minibroker.runtime.grpc_guard import RequestGuard
from minibroker.runtime.grpc_options import server_options
from minibroker.runtime.program import install_stop_signals, log_startup, zk_store_for
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkError, ZkNodeExists, ZkStore

BROKER_SERVICE = "minibroker.v1.Broker"


def get_or_create_cluster_id(store: ZkStore) -> str:
    """/cluster/id, created by the first broker as Kafka does (reference §1.11)."""
    got = store.get_or_none(ClusterIdZNode.path)
    if got is None:
        new_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        with contextlib.suppress(ZkNodeExists):
            store.create(ClusterIdZNode.path, ClusterIdZNode.encode(new_id), makepath=True)
        got = store.get(ClusterIdZNode.path)
    return ClusterIdZNode.decode(got[0])


# Fetch responses reach replica.fetch.response.max.bytes (10 MiB) and produce requests carry
# batches up to message.max.bytes per partition: gRPC's 4 MiB default is too small.
GRPC_OPTIONS = server_options(max_message_bytes=64 << 20)


STOP_STEP_WARN_S = 5.0


async def _stop_step(step: str, aw: Awaitable[object]) -> None:
    """One step of the clean stop; one that takes longer than STOP_STEP_WARN_S is said, with
    what every task is waiting on, before it is awaited to its end (a stop that hangs is then
    SIGKILLed by whoever stopped the broker, and the event says where it hung)."""
    task = asyncio.ensure_future(aw)
    done, _ = await asyncio.wait([task], timeout=STOP_STEP_WARN_S)
    if not done:
        waiting = [
            f"{t.get_name()}: {t.get_coro()!r}" for t in asyncio.all_tasks() if t is not task
        ]
        slog.event(
            "broker_stop_slow", logging.WARNING, step=step, after_s=STOP_STEP_WARN_S,
            tasks=waiting[:50],
        )  # fmt: skip
    await task


async def _stop_all(servers: dict[str, grpc.aio.Server], grace: float | None) -> None:
    await asyncio.gather(*(server.stop(grace=grace) for server in servers.values()))


async def run_broker(settings: Settings) -> int:
    log_startup("broker", settings)
    broker_id = settings.get_int("broker.id")
    log_dir = Path(settings.get_str("log.dirs"))
    try:
        listeners = parse_listeners(settings.get_str("listeners"))
        protocols = security_protocol_map(
            settings.get_str("listener.security.protocol.map"), listeners
        )
        security = BrokerSecurity(settings, protocols)
    except (ListenerError, SecurityConfigError) as exc:
        slog.event("broker_failed", logging.ERROR, error=str(exc))
        return 1
    # ZooKeeper's settings (zookeeper.set.acl needs a login) before any port is bound, as
    # Kafka's KafkaServer.startup runs initZkClient before its SocketServer starts.
    store = zk_store_for(settings)

    # One server per listener: a Metadata answer depends on the listener it came in on.
    servers: dict[str, grpc.aio.Server] = {}
    bound: dict[str, int] = {}
    health = HealthServicer()
    kafka = KafkaServers(security)
    for e in listeners:
        if speaks_kafka(e.listener):
            bound[e.listener] = await kafka.listen(e)
            if bound[e.listener] == 0:
                slog.event("broker_failed", logging.ERROR, error=f"cannot listen on {e}")
                return 1
            continue
        # A guard per server: it keeps the handlers of its own server (one per listener).
        servers[e.listener] = grpc.aio.server(
            options=GRPC_OPTIONS,
            interceptors=[*security.grpc_interceptors(e.listener), RequestGuard()],
        )
        health_pb2_grpc.add_HealthServicer_to_server(health, servers[e.listener])
        creds = security.grpc_credentials(e.listener)
        address = f"{e.host}:{e.port}"
        server = servers[e.listener]
        bound[e.listener] = (
            server.add_insecure_port(address)
            if creds is None
            else server.add_secure_port(address, creds)
        )
        if bound[e.listener] == 0:
            slog.event("broker_failed", logging.ERROR, error=f"cannot listen on {e}")
            return 1
    try:
        advertised = advertised_endpoints(
            listeners, settings.get_str("advertised.listeners"), bound
        )
    except ListenerError as exc:
        slog.event("broker_failed", logging.ERROR, error=str(exc))
        return 1
    rack = settings.get_str("broker.rack") or None

    def registration() -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=broker_id,
            endpoints=tuple(str(e) for e in advertised),
            listener_security_protocol_map=protocols,
            timestamp_ms=now_ms(),
            rack=rack,
        )

    stop = asyncio.Event()
    install_stop_signals(stop)
    health_updates: set[asyncio.Task[None]] = set()
    metrics = BrokerMetrics()
    try:
        await asyncio.to_thread(store.start)
        cluster_id = await asyncio.to_thread(get_or_create_cluster_id, store)
        await asyncio.to_thread(prepare_log_dir, log_dir, broker_id, cluster_id)
    except (ZkError, InconsistentBrokerId, OSError) as exc:
        slog.event("broker_failed", logging.ERROR, error=str(exc))
        await kafka.stop()
        await _stop_all(servers, None)
        return 1
    rm = ReplicaManager(settings, broker_id, log_dir, store, metrics)
    events = EventsServicer(slog.event_buffer())
    for name, server in servers.items():
        peers = security.grpc_peers(name)
        broker_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(rm, name, peers), server)
        control_pb2_grpc.add_ControlServicer_to_server(ControlServicer(rm, peers), server)
        txn_pb2_grpc.add_TxnMarkersServicer_to_server(TxnMarkersServicer(rm, peers), server)
        verification = TxnVerificationServicer(rm, peers, lambda: kafka.transactions)
        txn_pb2_grpc.add_TxnVerificationServicer_to_server(verification, server)
        events_pb2_grpc.add_EventsServicer_to_server(events, server)

    def on_epoch(epoch: int) -> None:
        rm.broker_epoch = epoch
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if epoch != NOT_REGISTERED
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for service in ("", BROKER_SERVICE):
            task = asyncio.get_running_loop().create_task(health.set(service, status))
            health_updates.add(task)  # keep a reference until done
            task.add_done_callback(health_updates.discard)

    metrics_port = settings.get_int("minibroker.metrics.port")
    if metrics_port > 0:
        metrics_port = metrics.serve(metrics_port, settings.get_str("minibroker.metrics.host"))
    for server in servers.values():
        await server.start()
    try:
        await security.start(store)  # credentials and ACLs before a Kafka client is served
    except ZkError as exc:
        slog.event("broker_failed", logging.ERROR, error=str(exc))
        await kafka.stop()
        await _stop_all(servers, None)
        return 1
    await kafka.start(rm, cluster_id)
    await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    slog.event(
        "broker_listening",
        listeners=[f"{e.listener}://{e.host}:{bound[e.listener]}" for e in listeners],
        advertised=[str(e) for e in advertised],
        metrics_port=metrics_port,
    )
    rm.isr.start()
    rm.logs.start()
    dynamic = DynamicConfigManager(
        store, settings, broker_id, rm.partitions, rm.topic_configs, security.on_user_changed
    )
    registrar = BrokerRegistrar(store, registration, on_epoch)
    try:
        await dynamic.start()  # dynamic configs in force before the first LeaderAndIsr
        await registrar.start()
        await kafka.serve()  # Kafka clients once registered (KafkaServer.startup's order)
    except ZkError as exc:
        slog.event("broker_failed", logging.ERROR, error=str(exc))
        await dynamic.stop()
        await kafka.stop()
        await _stop_all(servers, None)
        return 1

    slog.event("broker_started", broker_id=broker_id, cluster_id=cluster_id)
    await stop.wait()

    slog.event("broker_stopping", broker_id=broker_id)
    if settings.get_bool("controlled.shutdown.enable") and rm.broker_epoch != NOT_REGISTERED:
        await controlled_shutdown(store, settings, broker_id, rm.broker_epoch)
    await _stop_step("health", health.enter_graceful_shutdown())
    await _stop_step("dynamic configs", dynamic.stop())
    await _stop_step("kafka listeners", kafka.stop())
    await _stop_step("security", security.stop())
    await _stop_step("grpc servers", _stop_all(servers, 1.0))
    await _stop_step("fetchers", rm.fetchers.stop())
    await _stop_step("isr tasks", rm.isr.stop())  # writes a last HW checkpoint
    await _stop_step("log manager", rm.logs.stop())  # and log start offsets
    # and the leader-epoch checkpoints not yet written
    await _stop_step("epoch checkpoints", rm.opener.epoch_writer.flush())
    for hosted in list(rm.partitions.values()):
        # Kafka's clean shutdown: a producer snapshot at the log end, then everything synced.
        await asyncio.to_thread(hosted.log.write_producer_snapshot)
        await asyncio.to_thread(hosted.log.flush)
    registrar.close()
    await asyncio.to_thread(store.stop)
    slog.event("broker_stopped", broker_id=broker_id)
    return 0
