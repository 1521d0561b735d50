"""A broker's controlled shutdown (reference §5.8): before stopping, ask the active controller
to move this broker's leaderships away, up to controlled.shutdown.max.retries times; stop
regardless afterwards. The broker keeps serving while the controller does it."""

from __future__ import annotations

import asyncio
import logging

import grpc

from minibroker.client.controller_admin import controller_address
from minibroker.core.errors import ErrorCode, error_name
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkError, ZkStore


async def controlled_shutdown(
    store: ZkStore, settings: Settings, broker_id: int, broker_epoch: int
) -> bool:
    retries = settings.get_int("controlled.shutdown.max.retries")
    backoff_s = settings.get_int("controlled.shutdown.retry.backoff.ms") / 1000
    request = control_pb2.ControlledShutdownRequest(broker_id=broker_id, broker_epoch=broker_epoch)
    for attempt in range(1, retries + 1):
        outcome = "no controller"
        try:
            address = await asyncio.to_thread(
                controller_address, store, settings.get_str("inter.broker.listener.name")
            )
            if address is not None:
                async with grpc_security.aio_channel(address) as channel:
                    stub = control_pb2_grpc.ControlStub(channel)
                    response = await stub.ControlledShutdown(request, timeout=30)
                remaining = [
                    f"{p.topic_name}-{p.partition_index}" for p in response.remaining_partitions
                ]
                if response.error_code == ErrorCode.NONE and not remaining:
                    slog.event("controlled_shutdown_succeeded", attempt=attempt)
                    return True
                outcome = f"{error_name(response.error_code)}, still leading {remaining}"
        except (grpc.aio.AioRpcError, ZkError) as exc:
            outcome = repr(exc)
        slog.event(
            "controlled_shutdown_attempt_failed", logging.WARNING, attempt=attempt, outcome=outcome
        )
        if attempt < retries:
            await asyncio.sleep(backoff_s)
    slog.event("controlled_shutdown_failed", logging.WARNING, attempts=retries)
    return False
