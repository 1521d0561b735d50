"""A sent record's future, completed with its whole batch: Kafka's FutureRecordMetadata over one
ProduceRequestResult per batch. The sender settles a batch once, not each of its records, and
a record's RecordMetadata is made only when someone asks for it.

RecordFuture follows asyncio's future protocol (`_asyncio_future_blocking`, `get_loop`,
callbacks run through the loop with their context), so it can be awaited and handed to
`asyncio.gather`, `wait`, `wait_for` and `shield` like an `asyncio.Future`; it is not one,
because an `asyncio.Future` per record, each settled on its own, was the producer's largest
cost per record (bench/profiles/producer.md).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Generator
from typing import Any

from minibroker.client.record_metadata import RecordMetadata
from minibroker.core.types import TopicPartition

Callback = Callable[["RecordFuture"], object]


class BatchResult:
    """One batch's outcome, shared by the futures of its records (Kafka's
    ProduceRequestResult): the base offset and log append time, or the error."""

    __slots__ = ("tp", "_loop", "done", "base_offset", "log_append_time_ms", "error", "_watched")

    def __init__(self, tp: TopicPartition, loop: asyncio.AbstractEventLoop) -> None:
        self.tp = tp
        self._loop = loop
        self.done = False
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: BaseException | None = None
        # Futures of this batch that callbacks wait on: only they are visited when it settles.
        self._watched: list[RecordFuture] = []

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        """Acknowledged: record i is at base_offset + i (-1 when the broker did not say)."""
        if self.done:
            return
        self.base_offset = base_offset
        self.log_append_time_ms = log_append_time_ms
        self._settle()

    def fail(self, error: BaseException) -> None:
        if self.done:
            return
        self.error = error
        self._settle()

    def _settle(self) -> None:
        self.done = True
        watched, self._watched = self._watched, []
        for future in watched:
            future._schedule_callbacks()


class RecordFuture:
    """The future `Producer.send` returns: resolves with the record's RecordMetadata once its
    batch is acknowledged, or raises the batch's ProduceError."""

    __slots__ = (
        "_batch",
        "_index",
        "_timestamp_ms",
        "_callbacks",
        "_cancelled",
        "_asyncio_future_blocking",
    )

    def __init__(self, batch: BatchResult, index: int, timestamp_ms: int) -> None:
        self._batch = batch
        self._index = index
        self._timestamp_ms = timestamp_ms
        self._callbacks: list[tuple[Callback, contextvars.Context | None]] | None = None
        # None, or the CancelledError of a cancel(): its message is asyncio's cancel message.
        self._cancelled: asyncio.CancelledError | None = None
        # asyncio's mark of a future-like object: True while a task waits on this one.
        self._asyncio_future_blocking = False

    @classmethod
    def failed(cls, batch: BatchResult, error: BaseException) -> RecordFuture:
        """The future of a record refused before it was buffered, in a batch of its own."""
        batch.fail(error)
        return cls(batch, 0, -1)

    # ---- state ---------------------------------------------------------------------------------

    def done(self) -> bool:
        return self._cancelled is not None or self._batch.done

    def cancelled(self) -> bool:
        return self._cancelled is not None

    def result(self) -> RecordMetadata:
        if self._cancelled is not None:
            raise self._make_cancelled_error()
        batch = self._batch
        if not batch.done:
            raise asyncio.InvalidStateError("the record's batch is not acknowledged yet")
        if batch.error is not None:
            raise batch.error
        offset = batch.base_offset + self._index if batch.base_offset >= 0 else -1
        ts = batch.log_append_time_ms if batch.log_append_time_ms > 0 else self._timestamp_ms
        return RecordMetadata(batch.tp.topic, batch.tp.partition, offset, ts)

    def exception(self) -> BaseException | None:
        if self._cancelled is not None:
            raise self._make_cancelled_error()
        if not self._batch.done:
            raise asyncio.InvalidStateError("the record's batch is not acknowledged yet")
        return self._batch.error

    def cancel(self, msg: Any | None = None) -> bool:
        """Stop waiting for this record (asyncio's meaning): the record is still sent, as
        Kafka's FutureRecordMetadata cannot unsend one either."""
        if self.done():
            return False
        self._cancelled = asyncio.CancelledError() if msg is None else asyncio.CancelledError(msg)
        self._schedule_callbacks()
        return True

    # What asyncio.gather reads of a cancelled future, as of an asyncio.Future.
    @property
    def _cancel_message(self) -> Any | None:
        return self._cancelled.args[0] if self._cancelled and self._cancelled.args else None

    def _make_cancelled_error(self) -> asyncio.CancelledError:
        message = self._cancel_message
        return asyncio.CancelledError() if message is None else asyncio.CancelledError(message)

    # ---- callbacks -----------------------------------------------------------------------------

    def get_loop(self) -> asyncio.AbstractEventLoop:
        return self._batch._loop

    def add_done_callback(
        self, fn: Callback, *, context: contextvars.Context | None = None
    ) -> None:
        if self.done():
            self._batch._loop.call_soon(fn, self, context=context)
            return
        if self._callbacks is None:
            self._callbacks = []
            self._batch._watched.append(self)
        self._callbacks.append((fn, context))

    def remove_done_callback(self, fn: Callback) -> int:
        if not self._callbacks:
            return 0
        kept = [(f, c) for f, c in self._callbacks if f != fn]
        removed = len(self._callbacks) - len(kept)
        self._callbacks = kept
        return removed

    def _schedule_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        for fn, context in callbacks or ():
            self._batch._loop.call_soon(fn, self, context=context)

    # ---- awaiting ------------------------------------------------------------------------------

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self.done():
            self._asyncio_future_blocking = True
            yield self  # the task registers its wake-up with add_done_callback
        if not self.done():
            raise RuntimeError("await wasn't used with future")
        return self.result()

    __iter__ = __await__
