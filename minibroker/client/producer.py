"""The async producer: batches records per partition and sends each leader one Produce request
for its ready partitions, retrying after metadata refreshes until delivery_timeout_ms. One
batch in flight per partition keeps a partition's records in order, across retries too.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from minibroker.client.accumulator import (
    MAX_RECORD_OVERHEAD,
    Outcome,
    ProducerBatch,
    RecordAccumulator,
    produce_outcome,
    record_size_upper_bound,
)
from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.client.errors import (
    ClientClosed,
    NoBrokerAvailable,
    ProduceError,
    UnknownTopicError,
)
from minibroker.client.metadata import BrokerNode, connect
from minibroker.client.partition_choice import PartitionChooser
from minibroker.client.record_future import BatchResult, RecordFuture
from minibroker.client.record_metadata import RecordMetadata
from minibroker.client.requests import PartitionResult, produce_request, produce_results
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import monotonic_ms, now_ms
from minibroker.runtime.deadlines import wait_set

# The gRPC deadline of a Produce call exceeds the broker's own timeout_ms by this much, so a
# slow acks=all write comes back as the broker's REQUEST_TIMED_OUT rather than a dropped call.
_DEADLINE_MARGIN_MS = 1000

# Retriable answers after which the partition's leader is looked up again before a retry: an
# old leader cut off from its followers times out acks=all writes without ever learning that
# it lost the leadership, so retrying where it is would retry there until delivery_timeout_ms.
_STALE_LEADER_HINTS = frozenset({ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION})

Acks = Literal[-1, 0, 1, "all"]
Batch = ProducerBatch[BatchResult]


@dataclass
class ProducerMetrics:
    """Kafka's producer metrics of the same names: records acknowledged, and records whose
    delivery failed (refused before buffering or not)."""

    record_send_total: int = 0
    record_error_total: int = 0


class Producer:
    """`async with Producer("host:port") as p: fut = await p.send("t", b"v"); await fut`.

    Kafka's settings and defaults. `send` returns once the record is buffered; its future
    resolves with RecordMetadata when acknowledged, or fails with ProduceError.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: Acks = -1,
        linger_ms: int = 5,
        batch_size: int = 16384,
        buffer_memory: int = 32 * 1024 * 1024,
        max_request_size: int = 1024 * 1024,
        request_timeout_ms: int = 30000,
        delivery_timeout_ms: int = 120000,
        retries: int = 2**31 - 1,
        retry_backoff_ms: int = 100,
        max_in_flight_requests_per_connection: int = 5,
        max_block_ms: int = 60000,
        metadata_max_age_ms: int = 300000,
        partitioner_seed: int | None = None,
        channels: ChannelPool | None = None,
    ) -> None:
        self._acks = -1 if acks == "all" else int(acks)
        if self._acks not in (-1, 0, 1):
            raise ValueError(f"acks must be all, -1, 0 or 1, got {acks!r}")
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ValueError("delivery_timeout_ms must be >= linger_ms + request_timeout_ms")
        self._owns_channels, self._channels, self._metadata = connect(
            bootstrap,
            channels,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._acc: RecordAccumulator[BatchResult] = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            retry_backoff_ms=retry_backoff_ms,
            new_outcome=lambda tp: BatchResult(tp, asyncio.get_running_loop()),
        )
        self._buffer_memory = buffer_memory
        self._max_request_size = max_request_size
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._retries = retries
        self._retry_backoff_ms = retry_backoff_ms
        self._max_in_flight = max_in_flight_requests_per_connection
        self._max_block_ms = max_block_ms
        self._chooser = PartitionChooser(
            random.Random(partitioner_seed), self._acc, self._metadata.cache
        )
        self._in_flight: dict[TopicPartition, Batch] = {}
        self._requests: dict[str, int] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()
        self._progress = asyncio.Event()
        self._sender: asyncio.Task[None] | None = None
        self._closed = False
        self.metrics = ProducerMetrics()

    async def __aenter__(self) -> Producer:
        self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _start(self) -> None:
        if self._closed:
            raise ClientClosed("the producer is closed")
        if self._sender is None:
            self._sender = asyncio.create_task(self._run())

    # ---- the caller's side -------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> RecordFuture:
        """Buffer one record; waits only for the topic's metadata or for buffer space. The
        future resolves with the record's RecordMetadata once acknowledged, or fails with
        ProduceError."""
        if self._sender is None or self._closed:
            self._start()
        if headers:
            size = record_size_upper_bound(key, value, headers)
        else:
            size = MAX_RECORD_OVERHEAD + len(key or b"") + len(value or b"")
        try:
            if size > self._max_request_size:
                raise ProduceError(
                    ErrorCode.MESSAGE_TOO_LARGE,
                    f"a record of {size} bytes exceeds max_request_size={self._max_request_size}",
                )
            # The common case awaits nothing: metadata known, buffer space free.
            count = self._metadata.cache.partition_count(topic)
            if count is None:
                count = len(await self._wait_topic(topic))
            tp = self._chooser.choose(topic, count, key, partition, size)
            buffered = self._acc.buffered_bytes
            if buffered and buffered + size > self._buffer_memory:
                await self._wait_for_buffer(size)
        except ProduceError as exc:
            self.metrics.record_error_total += 1
            tp = TopicPartition(topic, -1 if partition is None else partition)
            return RecordFuture.failed(BatchResult(tp, asyncio.get_running_loop()), exc)
        if self._closed:
            raise ClientClosed("the producer is closed")
        # A plain tuple, not a NewRecord: the collector forgets it (records.RecordFields).
        ts = now_ms() if timestamp_ms is None else timestamp_ms
        batch = self._acc.append(tp, (key, value, tuple(headers), ts), size, monotonic_ms())
        if RecordAccumulator.has_news(batch):
            self._wake.set()
        return RecordFuture(batch.outcome, len(batch.records) - 1, ts)

    async def send_and_wait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
    ) -> RecordMetadata:
        """Send one record and wait for its acknowledgement (raises ProduceError)."""
        return await (await self.send(topic, value, key=key, partition=partition))

    async def partitions_for(self, topic: str) -> list[int]:
        """The topic's partitions, waiting up to max_block_ms for its metadata; raises
        UnknownTopicError or NoBrokerAvailable."""
        parts = self._metadata.cache.partitions_for(topic)
        return parts or await self._metadata.wait_for_topic(topic, self._max_block_ms)

    async def flush(self) -> None:
        """Send everything buffered now, without lingering, and wait until each of those
        records is acknowledged or failed."""
        pending = [*self._acc.queued(), *self._in_flight.values()]
        if not pending:
            return
        self._acc.begin_flush()
        self._wake.set()
        try:
            while not all(b.completed for b in pending):
                self._progress.clear()
                await self._progress.wait()
        finally:
            self._acc.end_flush()

    async def close(self, timeout_ms: int | None = None) -> None:
        """Deliver what is buffered (up to `timeout_ms`, default: as long as delivery takes),
        then fail whatever is left and release the connections."""
        if self._closed:
            return
        self._closed = True
        self._acc.begin_close()
        self._wake.set()
        if self._sender is not None:
            try:
                timeout_s = None if timeout_ms is None else timeout_ms / 1000
                async with asyncio.timeout(timeout_s):
                    await asyncio.shield(self._sender)
            except TimeoutError:
                self._sender.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._sender
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._fail_all(ErrorCode.NETWORK_EXCEPTION, "the producer was closed before delivery")
        await self._metadata.close()
        if self._owns_channels:
            await self._channels.close()

    async def _wait_topic(self, topic: str) -> list[int]:
        try:
            return await self.partitions_for(topic)
        except NoBrokerAvailable as exc:
            raise ProduceError(ErrorCode.NETWORK_EXCEPTION, str(exc)) from None
        except UnknownTopicError as exc:
            raise ProduceError(
                exc.code, f"{exc.message} (not in metadata after max_block_ms={self._max_block_ms})"
            ) from None

    async def _wait_for_buffer(self, size: int) -> None:
        # Kafka's buffer.memory: a fast sender waits for acknowledgements instead of growing.
        deadline = monotonic_ms() + self._max_block_ms
        while self._acc.buffered_bytes and self._acc.buffered_bytes + size > self._buffer_memory:
            remaining_ms = deadline - monotonic_ms()
            if remaining_ms <= 0:
                raise ProduceError(
                    ErrorCode.REQUEST_TIMED_OUT,
                    f"buffer_memory stayed full for max_block_ms={self._max_block_ms}",
                )
            self._progress.clear()
            await wait_set(self._progress, remaining_ms / 1000)

    # ---- the sender task ---------------------------------------------------------------------

    async def _run(self) -> None:
        try:
            while not (self._closed and not self._acc.has_queued() and not self._in_flight):
                self._wake.clear()
                now = monotonic_ms()
                for batch in self._acc.expire(now, self._delivery_timeout_ms):
                    self._fail(batch, ErrorCode.REQUEST_TIMED_OUT, self._expiry_message(batch))
                self._metadata.maybe_refresh(now)
                check = self._acc.ready(now, self._in_flight)
                waiting_for_leader = self._send_ready(check.ready)
                delay = check.next_check_ms
                if waiting_for_leader:
                    delay = min(delay or self._retry_backoff_ms, self._retry_backoff_ms)
                await wait_set(self._wake, None if delay is None else delay / 1000)
        except Exception as exc:
            # A bug here must not leave callers waiting forever on their futures.
            slog.event("producer_sender_failed", logging.ERROR, error=repr(exc))
            self._closed = True
            self._fail_all(ErrorCode.UNKNOWN_SERVER_ERROR, f"producer sender failed: {exc!r}")

    def _send_ready(self, ready: list[TopicPartition]) -> bool:
        """Send the ready partitions' head batches, one request per leader broker; whether some
        ready partition has no known leader."""
        by_leader: dict[BrokerNode, list[TopicPartition]] = {}
        leaderless = False
        for tp in ready:
            leader = self._metadata.cache.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                leaderless = True
            else:
                by_leader.setdefault(leader, []).append(tp)
        for node, tps in by_leader.items():
            if self._requests.get(node.address, 0) >= self._max_in_flight:
                continue
            batches = self._acc.drain(tps, self._max_request_size)
            for b in batches:
                b.attempts += 1
                self._in_flight[b.tp] = b
            self._requests[node.address] = self._requests.get(node.address, 0) + 1
            task = asyncio.create_task(self._produce(node, batches))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return leaderless

    async def _produce(self, node: BrokerNode, batches: list[Batch]) -> None:
        payloads = [(b.tp, b.build()) for b in batches]
        request = produce_request(self._acks, self._request_timeout_ms, payloads)
        deadline_ms = self._request_timeout_ms + _DEADLINE_MARGIN_MS
        try:
            resp = await self._channels.call(node.address, "Produce", request, deadline_ms)
        except RpcFailure as exc:
            # The broker may be gone: forget it as these partitions' leader until metadata
            # says again where they are (Kafka's NetworkClient refreshes on a disconnect).
            self._metadata.mark_failed(node.address)
            for b in batches:
                self._metadata.request_update(b.tp)
            code = ErrorCode.NETWORK_EXCEPTION if exc.retriable else ErrorCode.UNKNOWN_SERVER_ERROR
            results = {b.tp: PartitionResult(code, -1, -1, str(exc)) for b in batches}
        else:
            results = {} if self._acks == 0 else produce_results(resp)
        finally:
            # On cancellation (close) the batches stay in _in_flight for close() to fail.
            self._requests[node.address] -= 1
        for b in batches:
            self._in_flight.pop(b.tp, None)
        self._wake.set()
        for b in batches:
            if self._acks == 0 and b.tp not in results:
                self._complete(b, PartitionResult(ErrorCode.NONE, -1, -1, ""))
            else:
                missing = PartitionResult(ErrorCode.UNKNOWN_SERVER_ERROR, -1, -1, "no answer")
                self._handle_result(b, results.get(b.tp, missing), node.address)

    def _handle_result(self, batch: Batch, result: PartitionResult, address: str) -> None:
        outcome = produce_outcome(result.error)
        if outcome is Outcome.DONE:
            self._complete(batch, result)
            return
        if result.error in _STALE_LEADER_HINTS:
            # Its own metadata would name itself again: learn the leader from another broker.
            self._metadata.request_update(batch.tp, suspect=address)
        elif outcome is Outcome.REFRESH_AND_RETRY:
            self._metadata.request_update(batch.tp)
        now = monotonic_ms()
        retriable = outcome is not Outcome.FAIL and batch.attempts <= self._retries
        if retriable and not batch.expired(now, self._delivery_timeout_ms):
            self._acc.reenqueue(batch, now)
            return
        message = result.message or result.error.name
        if retriable:
            message = f"{message}; {self._expiry_message(batch)}"
        self._fail(batch, result.error, message)

    def _expiry_message(self, batch: Batch) -> str:
        return (
            f"{len(batch.records)} record(s) for {batch.tp} not acknowledged within "
            f"delivery_timeout_ms={self._delivery_timeout_ms} ({batch.attempts} attempt(s))"
        )

    def _complete(self, batch: Batch, result: PartitionResult) -> None:
        self._acc.release(batch)
        self.metrics.record_send_total += len(batch.records)
        batch.outcome.complete(result.base_offset, result.log_append_time_ms)
        self._progress.set()

    def _fail(self, batch: Batch, code: ErrorCode, message: str) -> None:
        self._acc.release(batch)
        self.metrics.record_error_total += len(batch.records)
        batch.outcome.fail(ProduceError(code, message))
        self._progress.set()

    def _fail_all(self, code: ErrorCode, message: str) -> None:
        for batch in [*self._acc.abort_all(), *self._in_flight.values()]:
            if not batch.completed:
                self._fail(batch, code, message)
        self._in_flight.clear()
