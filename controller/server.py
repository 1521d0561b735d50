"""The controller process shell: ZooKeeper session, event loop, gRPC (health and
ControlledShutdown), its endpoint znode and metrics.

Health: the overall service ("") is SERVING while the process is connected; the service
"minibroker.v1.Control" is SERVING only while this controller is the active one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from controller.event_loop import ControllerEventLoop
from controller.logic.election import Role
from controller.metrics import ControllerMetrics
from minibroker.core.errors import ErrorCode
from minibroker.core.zk_layout import ControllerEndpointZNode
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime import logging as slog
from minibroker.runtime.program import install_stop_signals, log_startup, zk_store_for
from minibroker.runtime.settings import Settings
from minibroker.runtime.wire import error_to_wire
from minibroker.runtime.zk_store import SessionState, ZkError, ZkNodeExists, ZkStore

CONTROL_SERVICE = "minibroker.v1.Control"


class ControllerControlServicer(control_pb2_grpc.ControlServicer):  # type: ignore[misc]
    """Only ControlledShutdown is the controller's; brokers serve the other three."""

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


def register_endpoint(store: ZkStore, controller_id: int, host: str, port: int) -> None:
    path = ControllerEndpointZNode.path(controller_id)
    store.ensure_paths([ControllerEndpointZNode.root])
    with contextlib.suppress(ZkNodeExists):  # ours from a previous session: replaced below
        store.create(path, ControllerEndpointZNode.encode(host, port), ephemeral=True)
        return
    got = store.exists(path)
    if got is not None and got.ephemeral_owner != store.session_id:
        store.delete(path)
        store.create(path, ControllerEndpointZNode.encode(host, port), ephemeral=True)


async def run_controller(settings: Settings) -> int:
    log_startup("controller", settings)
    controller_id = settings.get_int("minibroker.controller.id")
    host, _, port = settings.get_str("minibroker.controller.listener").rpartition(":")
    metrics = ControllerMetrics()

    server = grpc.aio.server()
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    bound_port = server.add_insecure_port(f"{host}:{port}")
    if bound_port == 0:
        slog.event("controller_failed", logging.ERROR, error=f"cannot listen on {host}:{port}")
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
        await asyncio.to_thread(register_endpoint, store, controller_id, host, bound_port)
    except ZkError as exc:
        slog.event("controller_failed", logging.ERROR, error=str(exc))
        return 1
    loop = asyncio.get_running_loop()

    def on_session(state: SessionState) -> None:
        if state is SessionState.CONNECTED:  # after an expiry the ephemeral znode is gone
            loop.call_soon_threadsafe(
                lambda: asyncio.ensure_future(
                    asyncio.to_thread(register_endpoint, store, controller_id, host, bound_port)
                )
            )

    store.add_state_listener(on_session)
    events = ControllerEventLoop(store, settings, controller_id, on_role, metrics)
    control_pb2_grpc.add_ControlServicer_to_server(ControllerControlServicer(events), server)
    metrics_port = settings.get_int("minibroker.metrics.port")
    if metrics_port > 0:
        metrics_port = metrics.serve(metrics_port)
    await server.start()
    await health.set(CONTROL_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
    await health.set("", health_pb2.HealthCheckResponse.SERVING)
    slog.event("controller_listening", host=host, port=bound_port, metrics_port=metrics_port)

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
