"""The controller process shell: ZooKeeper session, event loop, gRPC (health and
ControlledShutdown), its endpoint znode and metrics.

Health: the overall service ("") is SERVING while the process is connected; the service
"minibroker.v1.Control" is SERVING only while this controller is the active one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Sequence
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from controller.event_loop import ControllerEventLoop
from controller.logic.election import Role
from controller.metrics import ControllerMetrics
from minibroker.core.errors import ErrorCode
from minibroker.core.listeners import (
    Endpoint,
    ListenerError,
    advertised_endpoints,
    parse_listeners,
    security_protocol_map,
)
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ControllerEndpointZNode
from minibroker.rpc import control_pb2, control_pb2_grpc, events_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime import logging as slog
from minibroker.runtime.event_service import EventsServicer
from minibroker.runtime.grpc_guard import RequestGuard
from minibroker.runtime.grpc_options import server_options
from minibroker.runtime.program import install_stop_signals, log_startup, zk_store_for
from minibroker.runtime.settings import Settings
from minibroker.runtime.wire import error_to_wire
from minibroker.runtime.zk_store import SessionState, ZkError, ZkNodeExists, ZkStore

CONTROL_SERVICE = "minibroker.v1.Control"


class ControllerControlServicer(control_pb2_grpc.ControlServicer):  # type: ignore[misc]
    """ControlledShutdown and the admin requests brokers forward (reassignments, elections)
    are the controller's; brokers serve LeaderAndIsr, UpdateMetadata and StopReplica."""

    def __init__(self, events: ControllerEventLoop) -> None:
        self.events = events

    async def ControlledShutdown(  # noqa: N802
        self, request: Any, context: Any
    ) -> control_pb2.ControlledShutdownResponse:
        broker_epoch = request.broker_epoch if request.HasField("broker_epoch") else -1
        try:
            error, remaining = await self.events.controlled_shutdown(
                int(request.broker_id), int(broker_epoch)
            )
        except Exception as exc:  # never raise across gRPC
            slog.event(
                "request_failed", logging.ERROR, request="ControlledShutdown", error=repr(exc)
            )
            error, remaining = ErrorCode.UNKNOWN_SERVER_ERROR, []
        response = control_pb2.ControlledShutdownResponse(error_code=error_to_wire(error))
        for tp in remaining:
            response.remaining_partitions.add(topic_name=tp.topic, partition_index=tp.partition)
        return response

    async def _ask(self, name: str, payload: Any) -> tuple[ErrorCode, Any, str]:
        try:
            error, result = await self.events.request(name, payload)
        except Exception as exc:  # never raise across gRPC
            slog.event("request_failed", logging.ERROR, request=name, error=repr(exc))
            return ErrorCode.UNKNOWN_SERVER_ERROR, None, repr(exc)
        message = "this controller is not the active one" if result is None else ""
        return error, result, message

    async def AlterPartitionReassignments(  # noqa: N802
        self, request: Any, context: Any
    ) -> control_pb2.AlterPartitionReassignmentsResponse:
        targets = {
            TopicPartition(p.topic, p.partition): None if p.cancel else tuple(p.replicas)
            for p in request.partitions
        }
        error, results, message = await self._ask("AlterPartitionReassignments", targets)
        response = control_pb2.AlterPartitionReassignmentsResponse(
            error_code=error_to_wire(error), error_message=message
        )
        for tp, (code, text) in sorted((results or {}).items()):
            response.results.add(
                topic=tp.topic, partition=tp.partition, error_code=error_to_wire(code),
                error_message=text or "",
            )  # fmt: skip
        return response

    async def ListPartitionReassignments(  # noqa: N802
        self, request: Any, context: Any
    ) -> control_pb2.ListPartitionReassignmentsResponse:
        wanted = None if request.all else [_tp(p) for p in request.partitions]
        error, ongoing, message = await self._ask("ListPartitionReassignments", wanted)
        response = control_pb2.ListPartitionReassignmentsResponse(
            error_code=error_to_wire(error), error_message=message
        )
        for tp, a in sorted((ongoing or {}).items()):
            response.reassignments.add(
                topic=tp.topic, partition=tp.partition, replicas=a.replicas,
                adding_replicas=a.adding, removing_replicas=a.removing,
            )  # fmt: skip
        return response

    async def ElectLeaders(self, request: Any, context: Any) -> control_pb2.ElectLeadersResponse:  # noqa: N802
        wanted = None if request.all else [_tp(p) for p in request.partitions]
        error, results, message = await self._ask(
            "ElectLeaders", (int(request.election_type), wanted)
        )
        response = control_pb2.ElectLeadersResponse(
            error_code=error_to_wire(error), error_message=message
        )
        for tp, (code, text, leader) in sorted((results or {}).items()):
            response.results.add(
                topic=tp.topic, partition=tp.partition, error_code=error_to_wire(code),
                error_message=text or "", leader=leader,
            )  # fmt: skip
        return response


def _tp(ref: Any) -> TopicPartition:
    return TopicPartition(ref.topic, ref.partition)


def register_endpoint(store: ZkStore, controller_id: int, endpoints: Sequence[Endpoint]) -> None:
    path = ControllerEndpointZNode.path(controller_id)
    data = ControllerEndpointZNode.encode([str(e) for e in endpoints])
    store.ensure_paths([ControllerEndpointZNode.root])
    with contextlib.suppress(ZkNodeExists):  # ours from a previous session: replaced below
        store.create(path, data, ephemeral=True)
        return
    got = store.exists(path)
    if got is not None and got.ephemeral_owner != store.session_id:
        store.delete(path)
        store.create(path, data, ephemeral=True)


def controller_tls(settings: Settings, listeners: Sequence[Endpoint]) -> dict[str, Any] | None:
    """Each SSL listener's gRPC server credentials (the controller's keystore; client
    certificates required with ssl.client.auth=required); with any, every channel this
    controller opens to brokers dials TLS with its certificate. None: a setting is wrong."""
    try:
        protocols = security_protocol_map(
            settings.get_str("listener.security.protocol.map"), listeners
        )
        if not any(p == "SSL" for p in protocols.values()):
            grpc_security.configure_client(None)  # never a tools' environment it inherited
            return {}
        files = grpc_security.TlsFiles(
            settings.get_str("ssl.truststore.location"), settings.get_str("ssl.keystore.location")
        )
        grpc_security.configure_client(files)
        required = settings.get_str("ssl.client.auth") == "required"
        return {n: files.server_credentials(required) for n, p in protocols.items() if p == "SSL"}
    except (ListenerError, grpc_security.GrpcTlsError) as exc:
        slog.event("controller_failed", logging.ERROR, error=f"TLS: {exc}")
        return None


def bind_listeners(
    server: Any, listeners: Sequence[Endpoint], credentials: dict[str, Any] | None = None
) -> dict[str, int] | None:
    """Add one port per listener to the server; the bound ports by name, or None on failure."""
    bound = {}
    for e in listeners:
        creds = (credentials or {}).get(e.listener)
        address = f"{e.host}:{e.port}"
        port = (
            server.add_insecure_port(address)
            if creds is None
            else server.add_secure_port(address, creds)
        )
        if port == 0:
            slog.event("controller_failed", logging.ERROR, error=f"cannot listen on {e}")
            return None
        bound[e.listener] = port
    return bound


async def run_controller(settings: Settings) -> int:
    log_startup("controller", settings)
    controller_id = settings.get_int("minibroker.controller.id")
    try:
        listeners = parse_listeners(
            settings.get_str("minibroker.controller.listeners"), "minibroker.controller.listeners"
        )
    except ListenerError as exc:
        slog.event("controller_failed", logging.ERROR, error=str(exc))
        return 1
    metrics = ControllerMetrics()

    server = grpc.aio.server(options=server_options(), interceptors=[RequestGuard()])
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    credentials = controller_tls(settings, listeners)
    if credentials is None:
        return 1
    bound = bind_listeners(server, listeners, credentials)
    if bound is None:
        return 1
    try:
        advertised = advertised_endpoints(
            listeners, settings.get_str("minibroker.controller.advertised.listeners"), bound
        )
    except ListenerError as exc:
        slog.event("controller_failed", logging.ERROR, error=str(exc))
        return 1

    async def on_role(role: Role) -> None:
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if role is Role.ACTIVE
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        await health.set(CONTROL_SERVICE, status)

    store = zk_store_for(settings)
    stop = asyncio.Event()
    install_stop_signals(stop)
    try:
        await asyncio.to_thread(store.start)
        await asyncio.to_thread(register_endpoint, store, controller_id, advertised)
    except ZkError as exc:
        slog.event("controller_failed", logging.ERROR, error=str(exc))
        return 1
    loop = asyncio.get_running_loop()

    def on_session(state: SessionState) -> None:
        if state is SessionState.CONNECTED:  # after an expiry the ephemeral znode is gone
            loop.call_soon_threadsafe(
                lambda: asyncio.ensure_future(
                    asyncio.to_thread(register_endpoint, store, controller_id, advertised)
                )
            )

    store.add_state_listener(on_session)
    events = ControllerEventLoop(store, settings, controller_id, on_role, metrics)
    control_pb2_grpc.add_ControlServicer_to_server(ControllerControlServicer(events), server)
    events_pb2_grpc.add_EventsServicer_to_server(EventsServicer(slog.event_buffer()), server)
    metrics_port = settings.get_int("minibroker.metrics.port")
    if metrics_port > 0:
        metrics_port = metrics.serve(metrics_port, settings.get_str("minibroker.metrics.host"))
    await server.start()
    await health.set(CONTROL_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    slog.event(
        "controller_listening",
        listeners=[f"{e.listener}://{e.host}:{bound[e.listener]}" for e in listeners],
        advertised=[str(e) for e in advertised],
        metrics_port=metrics_port,
    )

    loop_task = asyncio.create_task(events.run())
    stop_task = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({loop_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    code = 0
    if loop_task in done:
        # The event loop only ends by an unexpected error: report it and exit non-zero.
        slog.event("controller_failed", logging.ERROR, error=repr(loop_task.exception()))
        stop_task.cancel()
        code = 1
    slog.event("controller_stopping", controller_id=controller_id, role=events.role.value)
    events.close()
    loop_task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await loop_task
    await events.shutdown()
    await health.enter_graceful_shutdown()
    await server.stop(grace=1.0)
    # Closing the session deletes our ephemeral /controller at once: a standby takes over now.
    await asyncio.to_thread(store.stop)
    slog.event("controller_stopped", controller_id=controller_id)
    return code
