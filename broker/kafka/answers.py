"""One connection's answers, written in request order while Produce requests overlap.

Kafka mutes a connection from a request's arrival until its answer is sent (SocketServer's
Processor: `selector.mute` on a completed receive, unmuted on the completed send), so an
acks=all Produce holds the next request back for its whole replication round trip; Kafka
hides that round trip behind its pool of request handler threads and a JVM's fast follower
fetches. A broker on one event loop cannot: librdkafka's pipelined produce requests queued
behind each other, and at half of the peak rate (1 KiB records) p50 rose to tens of ms
(bench/profiles/kafka-half-load.md).

So a Produce is started as soon as it arrives, while earlier ones wait for their followers,
and every other request waits until all earlier answers are out (nothing may read around a
produce it was sent after, as with Kafka). What a client sees stays Kafka's: answers in
request order, appends in request order (each Produce appends in its first step, before the
next one starts), a failed request closing the connection after the answers before it.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

# Unanswered Produce requests a connection may have running (Kafka's own producer sends at
# most max.in.flight.requests.per.connection = 5; librdkafka up to 1,000,000): the reader
# stops reading while this many wait.
MAX_OVERLAPPING_PRODUCES = 16


class OrderedAnswers:
    """Answers queued in request order and written by one responder task."""

    def __init__(
        self, write: Callable[[bytes], Awaitable[None]], on_failure: Callable[[], None]
    ) -> None:
        """`write` sends an answer; `on_failure` is called once an answer failed (the reader,
        maybe waiting for bytes, then finds `failure` set)."""
        self._write = write
        self._on_failure = on_failure
        self._pending: deque[asyncio.Future[bytes | None]] = deque()
        self._queued = asyncio.Event()
        self._progress = asyncio.Event()
        self.failure: BaseException | None = None
        self._responder = asyncio.ensure_future(self._respond())

    def start(self, answer: Awaitable[bytes | None]) -> None:
        """Run `answer` now; its bytes are written once every earlier answer was."""
        self._pending.append(asyncio.ensure_future(answer))
        self._queued.set()

    async def room(self) -> None:
        """Until fewer than MAX_OVERLAPPING_PRODUCES answers wait (raises a failure)."""
        await self._until(lambda: len(self._pending) < MAX_OVERLAPPING_PRODUCES)

    async def all_written(self) -> None:
        """Until every queued answer was written (raises the failure that ended them)."""
        await self._until(lambda: not self._pending)

    async def _until(self, done: Callable[[], bool]) -> None:
        while self.failure is None and not done():
            self._progress.clear()
            await self._progress.wait()
        if self.failure is not None:
            raise self.failure

    async def _respond(self) -> None:
        try:
            while True:
                while not self._pending:
                    self._queued.clear()
                    await self._queued.wait()
                answer = await self._pending[0]
                self._pending.popleft()
                if answer is not None:
                    await self._write(answer)
                self._progress.set()
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # the connection ends with it (the reader raises it)
            self.failure = exc
            self._progress.set()
            self._on_failure()

    async def close(self) -> None:
        """Stop the responder and every answer still running."""
        tasks: list[asyncio.Future[Any]] = [self._responder, *self._pending]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
