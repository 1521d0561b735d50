"""Reading the Events service of brokers and controllers: the kept events of one process, or
every process followed live (reconnecting, resuming by sequence number) and merged by time.

Events are the processes' own JSON log lines as dicts: {"ts", "level", "proc", "event", ...}.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import grpc

from minibroker.rpc import broker_pb2, broker_pb2_grpc, events_pb2, events_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime.clock import now_ms
from minibroker.runtime.deadlines import wait_set

Event = dict[str, Any]
RECONNECT_S = 1.0


class EventsUnavailable(RuntimeError):
    """A process's Events service could not be read; the message says which and why."""


@dataclass(frozen=True)
class Source:
    """One process to read events from: a name for messages and its gRPC address."""

    name: str
    address: str


def _event(record: Any) -> Event | None:
    try:
        obj = json.loads(record.json)
    except json.JSONDecodeError:
        return None
    if not isinstance(obj, dict) or "event" not in obj:
        return None
    obj.setdefault("ts", int(record.ts_ms))
    return obj


async def read_events(
    source: Source, since_ms: int = 0, timeout_s: float = 5.0, *, skip_routine: bool = False
) -> list[Event]:
    """The events `source` keeps, logged at or after `since_ms`, oldest first (without the
    routine per-request HW moves with `skip_routine`)."""
    request = events_pb2.StreamEventsRequest(since_ms=since_ms, skip_routine=skip_routine)
    try:
        async with grpc_security.aio_channel(source.address) as channel:
            stub = events_pb2_grpc.EventsStub(channel)
            out = []
            async for record in stub.Stream(request, timeout=timeout_s):
                ev = _event(record)
                if ev is not None:
                    out.append(ev)
            return out
    except grpc.aio.AioRpcError as exc:
        raise EventsUnavailable(
            f"{source.name} at {source.address}: {exc.code().name} {exc.details() or ''}".strip()
        ) from None


async def metadata_brokers(address: str, timeout_s: float = 5.0) -> list[Source]:
    """The live brokers a broker's Metadata names (endpoints of the listener we connected on)."""
    try:
        async with grpc_security.aio_channel(address) as channel:
            stub = broker_pb2_grpc.BrokerStub(channel)
            resp = await stub.Metadata(broker_pb2.MetadataRequest(), timeout=timeout_s)
    except grpc.aio.AioRpcError as exc:
        raise EventsUnavailable(f"{address}: {exc.code().name} {exc.details() or ''}") from None
    return [
        Source(f"broker-{b.node_id}", f"{b.host}:{b.port}")
        for b in sorted(resp.brokers, key=lambda b: b.node_id)
    ]


class _Failed(Exception):
    """A followed stream that ended before it started (its status code's name)."""


class TimeOrder:
    """Merges events arriving from many streams into time order: an event is released once it
    is `hold_ms` old, so one that arrives a little late still takes its place."""

    def __init__(self, hold_ms: int) -> None:
        self.hold_ms = hold_ms
        self._heap: list[tuple[int, int, Event]] = []
        self._n = 0

    def push(self, event: Event) -> None:
        self._n += 1
        heapq.heappush(self._heap, (int(event.get("ts", 0)), self._n, event))

    def ready(self, at_ms: int) -> list[Event]:
        out = []
        while self._heap and self._heap[0][0] <= at_ms - self.hold_ms:
            out.append(heapq.heappop(self._heap)[2])
        return out

    def drain(self) -> list[Event]:
        out = [e for _, _, e in sorted(self._heap)]
        self._heap.clear()
        return out


@dataclass
class _Cursor:
    """Where a followed stream got to, so a reconnect resumes without gaps or repeats."""

    boot_id: str = ""
    seq: int = 0
    connected: bool = False
    last_error: str = ""
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Follower:
    """Follows every source that `discover()` names (asked again every `rediscover_s`; sources
    once seen are kept and retried, so a restarted process is picked up again), calling
    `on_event` in time order and `on_status` with one line when a stream connects or breaks."""

    def __init__(
        self,
        discover: Callable[[], Awaitable[list[Source]]],
        on_event: Callable[[Event], None],
        on_status: Callable[[str], None],
        *,
        since_ms: int = 0,
        hold_ms: int = 300,
        rediscover_s: float = 2.0,
        skip_routine: bool = False,
    ) -> None:
        """`skip_routine`: the processes leave out the per-request HW moves (minibroker.core
        .event_kinds) instead of sending what the caller would drop."""
        self.discover = discover
        self.skip_routine = skip_routine
        self.on_event = on_event
        self.on_status = on_status
        self.since_ms = since_ms
        self.rediscover_s = rediscover_s
        self.order = TimeOrder(hold_ms)
        self.cursors: dict[Source, _Cursor] = {}

    async def run(self, stop: asyncio.Event) -> None:
        printer = asyncio.ensure_future(self._release(stop))
        try:
            while not stop.is_set():
                with contextlib.suppress(EventsUnavailable, OSError):
                    self._add_sources(await self.discover())
                await wait_set(stop, self.rediscover_s)
        finally:
            for cursor in self.cursors.values():
                if cursor.task is not None:
                    cursor.task.cancel()
            await asyncio.gather(
                *(c.task for c in self.cursors.values() if c.task is not None),
                return_exceptions=True,
            )
            await printer
            for ev in self.order.drain():
                self.on_event(ev)

    def _add_sources(self, sources: Iterable[Source]) -> None:
        for source in sources:
            if source not in self.cursors:
                cursor = _Cursor()
                self.cursors[source] = cursor
                cursor.task = asyncio.ensure_future(self._follow(source, cursor))

    async def _release(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for ev in self.order.ready(now_ms()):
                self.on_event(ev)
            await wait_set(stop, 0.1)

    async def _follow(self, source: Source, cursor: _Cursor) -> None:
        while True:
            request = events_pb2.StreamEventsRequest(
                since_ms=self.since_ms,
                follow=True,
                after_boot_id=cursor.boot_id,
                after_seq=cursor.seq,
                skip_routine=self.skip_routine,
            )
            try:
                async with grpc_security.aio_channel(source.address) as channel:
                    stub = events_pb2_grpc.EventsStub(channel)
                    call = stub.Stream(request)
                    await call.initial_metadata()
                    # An unreachable process ends the call with empty headers, not an error.
                    if call.done() and (code := await call.code()) != grpc.StatusCode.OK:
                        raise _Failed(code.name)
                    cursor.connected = True
                    self.on_status(f"following {source.name} at {source.address}")
                    async for record in call:
                        if record.boot_id != cursor.boot_id:
                            cursor.boot_id, cursor.seq = record.boot_id, 0
                        cursor.seq = max(cursor.seq, int(record.seq))
                        ev = _event(record)
                        if ev is not None:
                            self.order.push(ev)
                error = "stream ended"
            except grpc.aio.AioRpcError as exc:
                error = exc.code().name
            except _Failed as exc:
                error = str(exc)
            except (OSError, ValueError, RuntimeError) as exc:  # one source must not end all
                error = repr(exc)
            where = f"{source.name} at {source.address} ({error}); retrying"
            if cursor.connected:
                self.on_status(f"lost {where}")
            elif error != cursor.last_error:
                self.on_status(f"cannot reach {where}")
            cursor.connected = False
            cursor.last_error = error
            await asyncio.sleep(RECONNECT_S)
