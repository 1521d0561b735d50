"""A run's traffic and live observers on one asyncio loop in a background thread: the verifying
producer (acks=all), the verifying consumer (raw Fetches with their HW), the HW monitor
(DescribeBroker every 50 ms), the event streams. The scenario's thread calls in with `call`."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.client.errors import ClientError
from minibroker.client.events import Follower, Source
from minibroker.client.probe import describe_replicas, fetch_once, produce_once
from minibroker.client.producer import Producer
from minibroker.client.record_future import RecordFuture
from minibroker.client.record_metadata import RecordMetadata
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import now_ms
from minibroker.runtime.deadlines import wait_set
from minibroker.scenarios.history import FetchRead, History, HwSample, Produced
from minibroker.scenarios.timeline import Timeline

T = TypeVar("T")
HW_POLL_S = 0.05
# Unacknowledged records a partition may have outstanding: an offline partition then stops
# taking new records instead of filling the producer's buffer.
MAX_OUTSTANDING = 64


@dataclass(frozen=True)
class Traffic:
    """How much to send: records per second over all partitions, and the value prefix that
    makes this run's values unique (derived from the seed)."""

    records_per_s: float = 120.0
    tag: str = "r"


class Workload:
    """Start with `start()`; `stop_producing()` ends the traffic and waits for the answers;
    `stop()` ends everything. `leader_of(partition)` names the leader the consumer fetches
    from (the ZooKeeper recorder's latest state)."""

    def __init__(
        self,
        history: History,
        timeline: Timeline,
        brokers: dict[int, str],
        sources: list[Source],
        leader_of: Callable[[int], int | None],
        traffic: Traffic,
    ) -> None:
        self.history = history
        self.timeline = timeline
        self.brokers = dict(brokers)
        self.sources = list(sources)
        self.leader_of = leader_of
        self.traffic = traffic
        self.partitions = sorted(history.assignment)
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._main, name="workload", daemon=True)
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._stop_producing: asyncio.Event | None = None
        self._producer_done: asyncio.Event | None = None
        self._next_value: dict[int, int] = {}  # per partition, across resume_producing()
        self._resumed: set[asyncio.Future[None]] = set()
        self._channels: ChannelPool | None = None
        self._writer: asyncio.Future[None] | None = None
        self._last_sample: dict[tuple[int, int], HwSample] = {}
        self.acked_by_partition = dict.fromkeys(self.partitions, 0)

    # ---- the scenario thread's side ----------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        if not self._started.wait(10):
            raise RuntimeError("the workload's event loop did not start")

    def call(self, coro: Coroutine[Any, Any, T], timeout_s: float = 60.0) -> T:
        """Run `coro` on the workload's loop and return its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout_s)

    @property
    def channels(self) -> ChannelPool:
        assert self._channels is not None, "the workload is not running"
        return self._channels

    def acked(self) -> int:
        return sum(self.acked_by_partition.values())

    def stop_producing(self, timeout_s: float = 30.0) -> None:
        """Send nothing more and wait until every record sent was answered (or timed out)."""
        if not self._thread.is_alive() or self._stop_producing is None:
            return
        self.loop.call_soon_threadsafe(self._stop_producing.set)
        done = self._producer_done
        assert done is not None
        with contextlib.suppress(TimeoutError):  # the loop itself did not answer in time
            self.call(wait_set(done, timeout_s), timeout_s + 5)

    def resume_producing(self) -> None:
        """Start the verifying producer again after `stop_producing()`: the same ledger, the
        values go on where they stopped (so they stay unique)."""

        def restart() -> None:
            self._stop_producing = asyncio.Event()
            self._producer_done = asyncio.Event()
            task = asyncio.ensure_future(self._produce())
            self._resumed.add(task)  # keep a reference until done
            task.add_done_callback(self._resumed.discard)

        if self._thread.is_alive():
            self.loop.call_soon_threadsafe(restart)

    def stop(self) -> None:
        if self._thread.is_alive() and self._stop is not None:
            self.loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(timeout=30)

    # ---- the loop ----------------------------------------------------------------------------

    def _main(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._run())
        finally:
            self.loop.close()

    async def _run(self) -> None:
        self._stop = asyncio.Event()
        self._stop_producing = asyncio.Event()
        self._producer_done = asyncio.Event()
        self._channels = ChannelPool()
        follower = Follower(self._discover, self.timeline.event, lambda _line: None, hold_ms=300)
        events = asyncio.ensure_future(follower.run(self._stop))
        tasks = [
            asyncio.ensure_future(self._produce()),
            *(asyncio.ensure_future(self._consume(p)) for p in self.partitions),
            *(asyncio.ensure_future(self._monitor(b, a)) for b, a in sorted(self.brokers.items())),
        ]
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            self._stop_producing.set()
            # The follower ends by itself once stopped, releasing the events it still holds.
            await asyncio.wait([events], timeout=5)
            writer = [self._writer] if self._writer is not None else []
            for t in [*tasks, events, *writer]:
                t.cancel()
            await asyncio.gather(*tasks, events, *writer, return_exceptions=True)
            await self._channels.close()

    async def _discover(self) -> list[Source]:
        return self.sources

    # ---- the verifying producer --------------------------------------------------------------

    async def _produce(self) -> None:
        assert self._stop_producing is not None and self._producer_done is not None
        try:
            async with Producer(
                list(self.brokers.values()),
                acks="all",
                linger_ms=2,
                request_timeout_ms=5000,
                delivery_timeout_ms=20_000,
                max_block_ms=10_000,
                # A timed-out write sends the producer to other brokers for metadata; asking
                # every second as well moves it within a second of any election.
                metadata_max_age_ms=1000,
            ) as producer:
                await asyncio.gather(*(self._write(producer, p) for p in self.partitions))
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(30):
                        await producer.flush()
        finally:
            self._producer_done.set()

    async def _write(self, producer: Producer, partition: int) -> None:
        """One partition's records, paced, at most MAX_OUTSTANDING unanswered."""
        assert self._stop_producing is not None
        interval = len(self.partitions) / self.traffic.records_per_s
        slots = asyncio.Semaphore(MAX_OUTSTANDING)
        loop = asyncio.get_running_loop()
        next_at = loop.time()
        i = self._next_value.get(partition, 0)
        while not self._stop_producing.is_set():
            await slots.acquire()
            if self._stop_producing.is_set():
                break
            value = f"{self.traffic.tag}-p{partition}-{i:06d}"
            index = len(self.history.produced)
            self.history.produced.append(Produced(index, partition, value, now_ms()))
            try:
                fut = await producer.send(
                    self.history.topic, value.encode(), key=f"k{i}".encode(), partition=partition
                )
            except ClientError as exc:
                self._record(index, None, exc)
                slots.release()
            else:
                fut.add_done_callback(partial(self._done, index, slots))
            i += 1
            self._next_value[partition] = i
            next_at += interval
            delay = next_at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)  # pacing, not synchronisation
            else:
                next_at = loop.time()

    def _done(self, index: int, slots: asyncio.Semaphore, fut: RecordFuture) -> None:
        slots.release()
        if fut.cancelled():
            return
        exc = fut.exception()
        self._record(index, None if exc is not None else fut.result(), exc)

    def _record(self, index: int, md: RecordMetadata | None, exc: BaseException | None) -> None:
        p = self.history.produced[index]
        if md is not None:
            self.history.produced[index] = replace(
                p, outcome="acked", offset=md.offset, done_ms=now_ms()
            )
            self.acked_by_partition[p.partition] += 1
            return
        code = getattr(exc, "code", None)
        error = code.name if isinstance(code, ErrorCode) else type(exc).__name__
        self.history.produced[index] = replace(p, outcome="failed", error=error, done_ms=now_ms())

    # ---- a second writer ---------------------------------------------------------------------

    def start_concurrent_writer(self, partition: int, interval_s: float = 0.02) -> None:
        """Another acks=all client on `partition`: one single-record Produce every
        `interval_s` without waiting for the previous answers (the verifying producer keeps
        one batch in flight per partition, so while it waits for the HW the leader sees no
        appends). Its records are recorded and checked like the producer's."""
        self.loop.call_soon_threadsafe(self._start_writer, partition, interval_s)

    def stop_concurrent_writer(self) -> None:
        self.loop.call_soon_threadsafe(self._stop_writer)

    def _start_writer(self, partition: int, interval_s: float) -> None:
        if self._writer is None or self._writer.done():
            self._writer = asyncio.ensure_future(self._concurrent(partition, interval_s))

    def _stop_writer(self) -> None:
        if self._writer is not None:
            self._writer.cancel()

    async def _concurrent(self, partition: int, interval_s: float) -> None:
        tp = TopicPartition(self.history.topic, partition)
        pending: set[asyncio.Task[None]] = set()
        i = 0
        try:
            while True:
                leader = self.leader_of(partition)
                if leader is not None:
                    value = f"{self.traffic.tag}-w{partition}-{i:06d}"
                    task = asyncio.ensure_future(self._write_once(tp, leader, value))
                    pending.add(task)
                    task.add_done_callback(pending.discard)
                    i += 1
                await asyncio.sleep(interval_s)  # pacing
        finally:
            # Sends already made still get their answers (and are recorded); none are added.
            await asyncio.gather(*pending, return_exceptions=True)

    async def _write_once(self, tp: TopicPartition, leader: int, value: str) -> None:
        index = len(self.history.produced)
        self.history.produced.append(Produced(index, tp.partition, value, now_ms()))
        batch = build_batch([NewRecord(None, value.encode())], base_timestamp=now_ms())
        p = self.history.produced[index]
        try:
            result = await produce_once(
                self.channels, self.brokers[leader], tp, batch, acks=-1, timeout_ms=5000
            )
        except RpcFailure as exc:
            self.history.produced[index] = replace(
                p, outcome="failed", error=f"rpc {exc.status}", done_ms=now_ms()
            )
            return
        if result.error is ErrorCode.NONE:
            self.history.produced[index] = replace(
                p, outcome="acked", offset=result.base_offset, done_ms=now_ms()
            )
            self.acked_by_partition[tp.partition] += 1
        else:
            self.history.produced[index] = replace(
                p, outcome="failed", error=result.error.name, done_ms=now_ms()
            )

    # ---- the verifying consumer --------------------------------------------------------------

    async def _consume(self, partition: int) -> None:
        tp = TopicPartition(self.history.topic, partition)
        position = 0
        assert self._stop is not None
        while not self._stop.is_set():
            leader = self.leader_of(partition)
            address = self.brokers.get(leader) if leader is not None else None
            if address is None or leader is None:
                await asyncio.sleep(0.05)
                continue
            try:
                got = await fetch_once(self.channels, address, tp, position, timeout_ms=2000)
            except RpcFailure:
                await asyncio.sleep(0.1)
                continue
            records = got.records
            self.history.reads.append(
                FetchRead(
                    ts_ms=now_ms(),
                    broker=leader,
                    partition=partition,
                    fetch_offset=position,
                    high_watermark=got.high_watermark,
                    error=got.error.name,
                    first_offset=records[0].offset if records else -1,
                    last_offset=records[-1].offset if records else -1,
                    count=len(records),
                )
            )
            if records:
                position = records[-1].offset + 1
            elif got.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                # The log was truncated below our position (an unclean election): go on from
                # the leader's HW, as auto.offset.reset=latest would.
                new = got.high_watermark if 0 <= got.high_watermark < position else 0
                self.timeline.note(
                    f"consumer: {tp} position {position} out of range on broker {leader}; "
                    f"continuing at {new}"
                )
                position = new
            elif got.error is not ErrorCode.NONE:
                await asyncio.sleep(0.05)

    async def read_partition(self, partition: int, address: str, upto: int) -> dict[int, str]:
        """Every record of `partition` below `upto` from the broker at `address` (the
        validating read); stops early on an error it cannot read past."""
        tp = TopicPartition(self.history.topic, partition)
        out: dict[int, str] = {}
        position = 0
        errors = 0
        while position < upto and errors < 50:
            try:
                got = await fetch_once(self.channels, address, tp, position, max_wait_ms=0)
            except RpcFailure:
                errors += 1
                await asyncio.sleep(0.1)
                continue
            if got.error is not ErrorCode.NONE or not got.records:
                errors += 1
                await asyncio.sleep(0.05)
                continue
            for r in got.records:
                if r.offset < upto:
                    out[r.offset] = "" if r.value is None else r.value.decode(errors="replace")
            position = got.records[-1].offset + 1
        return out

    # ---- the HW monitor ----------------------------------------------------------------------

    async def _monitor(self, broker: int, address: str) -> None:
        assert self._stop is not None
        while not self._stop.is_set():
            try:
                described = await describe_replicas(self.channels, address, timeout_ms=1000)
            except RpcFailure:
                await asyncio.sleep(HW_POLL_S)
                continue
            ts = now_ms()
            for tp, r in sorted(described.replicas.items()):
                if tp.topic != self.history.topic:
                    continue
                sample = HwSample(
                    ts, broker, described.broker_epoch, tp.partition, r.is_leader, r.leader,
                    r.leader_epoch, r.high_watermark, r.log_end_offset, r.isr,
                )  # fmt: skip
                last = self._last_sample.get((broker, tp.partition))
                self._last_sample[(broker, tp.partition)] = sample
                # Only changes go into the history: an unchanged sample adds nothing to any
                # invariant (the latest one, with its time, is kept for freshness checks).
                if last is None or replace(last, ts_ms=ts) != sample:
                    self.history.hw_samples.append(sample)
            await asyncio.sleep(HW_POLL_S)

    def last_samples(self) -> dict[tuple[int, int], HwSample]:
        """(broker, partition) -> that broker's latest description of the partition (its
        `ts_ms` is when it was last polled)."""
        return dict(self._last_sample)
