"""The controller process shell: ZooKeeper session, event loop, gRPC health.

Health: the overall service ("") is SERVING while the process is connected; the service
"minibroker.v1.Control" is SERVING only while this controller is the active one.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_health.v1._async import HealthServicer

from controller.event_loop import ControllerEventLoop
from controller.logic.election import Role
from minibroker.runtime import logging as slog
from minibroker.runtime.program import install_stop_signals, log_startup, zk_store_for
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkError

CONTROL_SERVICE = "minibroker.v1.Control"


async def run_controller(settings: Settings) -> int:
    log_startup("controller", settings)
    controller_id = settings.get_int("minibroker.controller.id")
    host, _, port = settings.get_str("minibroker.controller.listener").rpartition(":")

    server = grpc.aio.server()
    health = HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    bound_port = server.add_insecure_port(f"{host}:{port}")
    if bound_port == 0:
        slog.event("controller_failed", logging.ERROR, error=f"cannot listen on {host}:{port}")
        return 1
    await server.start()
    await health.set(CONTROL_SERVICE, health_pb2.HealthCheckResponse.NOT_SERVING)
    slog.event("controller_listening", host=host, port=bound_port)

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
    except ZkError as exc:
        slog.event("controller_failed", logging.ERROR, error=str(exc))
        await server.stop(grace=None)
        return 1
    await health.set("", health_pb2.HealthCheckResponse.SERVING)

    events = ControllerEventLoop(store, controller_id, on_role)
    loop_task = asyncio.create_task(events.run())
    stop_task = asyncio.create_task(stop.wait())
    done, _ = await asyncio.wait({loop_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
    if loop_task in done:
        # The event loop only ends by an unexpected error: report it and exit non-zero.
        failure = loop_task.exception()
        slog.event("controller_failed", logging.ERROR, error=repr(failure))
        stop_task.cancel()
        code = 1
    else:
        code = 0
    slog.event("controller_stopping", controller_id=controller_id, role=events.role.value)
    events.close()
    loop_task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await loop_task
    await health.enter_graceful_shutdown()
    await server.stop(grace=1.0)
    # Closing the session deletes our ephemeral /controller at once: a standby takes over now.
    await asyncio.to_thread(store.stop)
    slog.event("controller_stopped", controller_id=controller_id)
    return code
