"""The Events gRPC service: a process's kept events, then (with `follow`) each new one.

Served by every broker and controller on each of its listeners (see proto/.../events.proto).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.rpc import events_pb2, events_pb2_grpc
from minibroker.runtime.event_buffer import EventBuffer, KeptEvent


def _record(boot_id: str, e: KeptEvent) -> events_pb2.EventRecord:
    return events_pb2.EventRecord(boot_id=boot_id, seq=e.seq, ts_ms=e.ts_ms, json=e.json)


class EventsServicer(events_pb2_grpc.EventsServicer):  # type: ignore[misc]
    def __init__(self, buffer: EventBuffer) -> None:
        self.buffer = buffer

    async def Stream(  # noqa: N802
        self, request: Any, context: Any
    ) -> AsyncIterator[events_pb2.EventRecord]:
        if request.since_ms < 0 or request.after_seq < 0:
            # A stream has no response field for an error code: the status carries Kafka's.
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"{ErrorCode.INVALID_REQUEST.name} ({int(ErrorCode.INVALID_REQUEST)}): "
                "since_ms and after_seq must be >= 0",
            )
        buffer = self.buffer
        after = request.after_seq if request.after_boot_id == buffer.boot_id else 0
        skip = request.skip_routine
        if not request.follow:
            for e in buffer.snapshot(request.since_ms, after, skip_routine=skip):
                yield _record(buffer.boot_id, e)
            return
        backlog, follower = buffer.follow(
            asyncio.get_running_loop(), request.since_ms, after, skip_routine=skip
        )
        # Headers now, so a follower knows it is connected before the first event comes.
        await context.send_initial_metadata(())
        try:
            for e in backlog:
                yield _record(buffer.boot_id, e)
            while True:
                item = await follower.queue.get()
                follower.backlog -= 1
                if item is None:  # fell too far behind: end; the client resumes by seq
                    return
                yield _record(buffer.boot_id, item)
        finally:
            buffer.unfollow(follower)
