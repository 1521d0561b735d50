"""What every broker RPC handler shares: optional protobuf fields read with a default, and the
guard that counts and times a request and answers UNKNOWN_SERVER_ERROR (with a request_failed
event) for an unexpected exception, so the broker keeps serving."""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.replica_manager import ReplicaManager
from minibroker.core.errors import ErrorCode
from minibroker.runtime import logging as slog

T = TypeVar("T")


def opt_field(msg: Any, name: str, default: int) -> int:
    return int(getattr(msg, name)) if msg.HasField(name) else default


async def guarded(
    rm: ReplicaManager, name: str, handler: Awaitable[T], on_error: Callable[[ErrorCode], T]
) -> T:
    started = time.perf_counter()
    rm.metrics.requests.labels(name).inc()
    try:
        return await handler
    except Exception as exc:  # the broker never crashes on a request
        slog.event("request_failed", logging.ERROR, request=name, error=repr(exc), exc_info=True)
        return on_error(ErrorCode.UNKNOWN_SERVER_ERROR)
    finally:
        rm.metrics.request_time.labels(name).observe((time.perf_counter() - started) * 1000)
