"""The broker process shell: gRPC server (Broker service + standard health), ZooKeeper session.

Health reports SERVING only while the broker is registered in ZooKeeper.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import logging
import uuid
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from broker.metadata_dir import InconsistentBrokerId, prepare_log_dir
from broker.registration import NOT_REGISTERED, BrokerRegistrar
from minibroker.core.errors import ErrorCode
from minibroker.core.zk_layout import (
    BrokerRegistration,
    ClusterIdZNode,
    ZNodeFormatError,
    parse_endpoint,
)
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.program import install_stop_signals, log_startup, zk_store_for
from minibroker.runtime.settings import Settings
from minibroker.runtime.wire import error_to_wire
from minibroker.runtime.zk_store import ZkError, ZkNodeExists, ZkStore

BROKER_SERVICE = "minibroker.v1.Broker"


def parse_listener(listeners: str) -> tuple[str, str, int]:
    """(name, host, port) of the first of Kafka's comma-separated `listeners`."""
    try:
        return parse_endpoint(listeners.split(",")[0])
    except ZNodeFormatError as exc:
        raise ValueError(f"listeners: {exc}") from None


class BrokerState:
    """What the servicers may read about this broker; owned by the loop."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.broker_id = settings.get_int("broker.id")
        self.broker_epoch = NOT_REGISTERED


class BrokerServicer(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    """Produce, Fetch and the rest arrive with the replication issues; until then gRPC answers
    UNIMPLEMENTED for them. DescribeBroker is real."""

    def __init__(self, state: BrokerState) -> None:
        self._state = state

    async def DescribeBroker(  # noqa: N802 (gRPC method name)
        self, request: Any, context: Any
    ) -> broker_pb2.DescribeBrokerResponse:
        s = self._state
        return broker_pb2.DescribeBrokerResponse(
            error_code=error_to_wire(ErrorCode.NONE),
            broker_id=s.broker_id,
            broker_epoch=s.broker_epoch,
            zookeeper_connect=s.settings.get_str("zookeeper.connect"),
            profile=s.settings.profile,
            config=s.settings.as_strings(),
        )


def get_or_create_cluster_id(store: ZkStore) -> str:
    """/cluster/id, created by the first broker as Kafka does (reference §1.11)."""
    got = store.get_or_none(ClusterIdZNode.path)
    if got is None:
        new_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        with contextlib.suppress(ZkNodeExists):
            store.create(ClusterIdZNode.path, ClusterIdZNode.encode(new_id), makepath=True)
        got = store.get(ClusterIdZNode.path)
    return ClusterIdZNode.decode(got[0])


async def run_broker(settings: Settings) -> int:
    log_startup("broker", settings)
    state = BrokerState(settings)
    listener_name, host, port = parse_listener(settings.get_str("listeners"))

    server = grpc.aio.server()
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    broker_pb2_grpc.add_BrokerServicer_to_server(BrokerServicer(state), server)
    bound_port = server.add_insecure_port(f"{host}:{port}")
    if bound_port == 0:
        slog.event("broker_failed", logging.ERROR, error=f"cannot listen on {host}:{port}")
        return 1
    await server.start()
    await health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
    slog.event("broker_listening", host=host, port=bound_port)

    advertised = (
        settings.get_str("advertised.listeners") or f"{listener_name}://{host}:{bound_port}"
    )
    _, adv_host, adv_port = parse_listener(advertised)
    adv_port = adv_port or bound_port
    rack = settings.get_str("broker.rack") or None

    def registration() -> BrokerRegistration:
        return BrokerRegistration(
            broker_id=state.broker_id,
            endpoints=(f"{listener_name}://{adv_host}:{adv_port}",),
            timestamp_ms=now_ms(),
            rack=rack,
        )

    health_updates: set[asyncio.Task[None]] = set()

    def on_epoch(epoch: int) -> None:
        state.broker_epoch = epoch
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if epoch != NOT_REGISTERED
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for service in ("", BROKER_SERVICE):
            task = asyncio.get_running_loop().create_task(health.set(service, status))
            health_updates.add(task)  # keep a reference until done
            task.add_done_callback(health_updates.discard)

    store = zk_store_for(settings)
    stop = asyncio.Event()
    install_stop_signals(stop)
    try:
        await asyncio.to_thread(store.start)
        cluster_id = await asyncio.to_thread(get_or_create_cluster_id, store)
        await asyncio.to_thread(
            prepare_log_dir, Path(settings.get_str("log.dirs")), state.broker_id, cluster_id
        )
        registrar = BrokerRegistrar(store, registration, on_epoch)
        await registrar.start()
    except (ZkError, InconsistentBrokerId, OSError) as exc:
        slog.event("broker_failed", logging.ERROR, error=str(exc))
        await server.stop(grace=None)
        return 1

    slog.event("broker_started", broker_id=state.broker_id, cluster_id=cluster_id)
    await stop.wait()

    slog.event("broker_stopping", broker_id=state.broker_id)
    await health.enter_graceful_shutdown()
    await server.stop(grace=1.0)
    registrar.close()
    await asyncio.to_thread(store.stop)
    slog.event("broker_stopped", broker_id=state.broker_id)
    return 0
