"""The failover benchmark's writer: one acks=all single-record Produce every 5 ms to the broker
that last acknowledged, or to every broker while none is known, so the first write a new leader
takes is seen within one tick; every write's broker, send and answer time are kept.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.client.probe import describe_replicas, produce_once
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import now_ms
from minibroker.runtime.deadlines import wait_set

T = TypeVar("T")
PROBE_INTERVAL_S = 0.005
PROBE_MAX_IN_FLIGHT = 200  # a stalled ISR holds every acks=all write; the probe then waits
PROBE_TIMEOUT_MS = 60_000  # longer than any stall here: writes wait, they do not time out


@dataclass(frozen=True)
class Write:
    """One probe Produce: which broker it went to, when, and its error ("" = acknowledged)."""

    broker: int
    sent_ms: int
    done_ms: int
    error: str

    @property
    def ok(self) -> bool:
        return not self.error


class Probe:
    """The acks=all writer (see module docstring) on its own asyncio loop in a thread; the
    benchmark's other gRPC calls (event reads) run on the same loop through `call`."""

    def __init__(self, tp: TopicPartition, brokers: dict[int, str]) -> None:
        self.tp = tp
        self.brokers = dict(brokers)
        self.loop = asyncio.new_event_loop()
        self._writes: list[Write] = []  # appended on the loop only, in order of answer
        self._leader: int | None = None
        # Kafka's client caps its reconnect backoff at 1 s; a shorter cap keeps a restarted
        # broker's channel from failing the probe's first writes to it for long.
        self._channels = ChannelPool(reconnect_backoff_ms=20, reconnect_backoff_max_ms=200)
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._main, name="probe", daemon=True)
        self._started = threading.Event()

    def __enter__(self) -> Probe:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the probe's event loop did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout=30)

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    def mark(self) -> int:
        """A position in the write record: `since(mark)` is every write answered after it."""
        return len(self._writes)

    def since(self, mark: int) -> list[Write]:
        return self._writes[mark:]

    def reachable(self, broker: int) -> bool:
        """Whether `broker` answers on the probe's own channel: after a restart that channel
        may still be backing off, which would fail the first writes to a new leader."""

        async def ping() -> bool:
            try:
                await describe_replicas(self._channels, self.brokers[broker], timeout_ms=1000)
            except RpcFailure:
                return False
            return True

        return self.call(ping())

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._run())
        finally:
            self.loop.close()

    async def _run(self) -> None:
        self._stop = stop = asyncio.Event()
        pending: set[asyncio.Task[None]] = set()
        self._started.set()
        try:
            while not stop.is_set():
                targets = [self._leader] if self._leader is not None else sorted(self.brokers)
                for broker in targets:
                    if len(pending) < PROBE_MAX_IN_FLIGHT:
                        task = asyncio.ensure_future(self._write(broker))
                        pending.add(task)
                        task.add_done_callback(pending.discard)
                await wait_set(stop, PROBE_INTERVAL_S)  # pacing
        finally:
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            await self._channels.close()

    async def _write(self, broker: int) -> None:
        sent = now_ms()
        batch = build_batch([NewRecord(None, b"probe")], base_timestamp=sent)
        try:
            result = await produce_once(
                self._channels,
                self.brokers[broker],
                self.tp,
                batch,
                acks=-1,
                timeout_ms=PROBE_TIMEOUT_MS,
            )
            error = "" if result.error is ErrorCode.NONE else result.error.name
        except RpcFailure as exc:
            error = f"rpc {exc.status}"
        if not error:
            self._leader = broker
        elif self._leader == broker:
            self._leader = None
        self._writes.append(Write(broker, sent, now_ms(), error))


def first_ack(writes: Iterable[Write], after_ms: int, not_by: int) -> Write | None:
    """The first acknowledged write answered after `after_ms` by a broker other than `not_by`."""
    return next((w for w in writes if w.ok and w.done_ms > after_ms and w.broker != not_by), None)


def last_ack_before(writes: Sequence[Write], before_ms: int, by: int) -> Write | None:
    """The last write `by` acknowledged before `before_ms`."""
    return next(
        (w for w in reversed(writes) if w.ok and w.broker == by and w.done_ms < before_ms), None
    )
