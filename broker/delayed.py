"""The two delayed operations: acks=-1 produce waiting for the HW, and fetch waiting for bytes
(reference §3.6, §3.7). Both re-check on the loop whenever a partition they watch changes."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from broker.purgatory import DelayedOperation
from broker.replication.partition import Partition
from broker.types import FetchPartitionResult, ProduceResult
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition


class DelayedProduce(DelayedOperation[dict[TopicPartition, ProduceResult]]):
    """Each appended partition starts as REQUEST_TIMED_OUT and is done when its leader's HW
    reaches last offset + 1 (or it lost leadership); reference §3.6."""

    def __init__(
        self,
        timeout_ms: int,
        results: dict[TopicPartition, ProduceResult],
        required_offsets: Mapping[TopicPartition, int],
        lookup: Callable[[TopicPartition], Partition | None],
    ) -> None:
        super().__init__(timeout_ms)
        self._results = dict(results)
        self._pending = dict(required_offsets)
        self._lookup = lookup

    def try_complete(
        self, changed: TopicPartition | None
    ) -> dict[TopicPartition, ProduceResult] | None:
        pending = list(self._pending) if changed is None else [changed]
        for tp in pending:
            required = self._pending.get(tp)
            if required is None:
                continue
            partition = self._lookup(tp)
            if partition is None:
                done, error = True, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                done, error = partition.check_enough_replicas_reach_offset(required)
            if done:
                del self._pending[tp]
                old = self._results[tp]
                self._results[tp] = ProduceResult(error, old.base_offset, old.log_start_offset)
        return None if self._pending else self._results

    def on_expiration(self) -> dict[TopicPartition, ProduceResult]:
        for tp in self._pending:
            old = self._results[tp]
            self._results[tp] = ProduceResult(
                ErrorCode.REQUEST_TIMED_OUT,
                old.base_offset,
                old.log_start_offset,
                "the high watermark did not reach the batch within timeout_ms",
            )
        return self._results


class AcksAllWaiters:
    """The partitions an acks=all produce is appending to or waiting on, counted."""

    def __init__(self) -> None:
        self._count: Counter[TopicPartition] = Counter()

    def urgent(self, tp: TopicPartition) -> bool:
        return tp in self._count

    @contextlib.contextmanager
    def waiting(self, tps: Iterable[TopicPartition]) -> Iterator[None]:
        tps = list(tps)
        self._count.update(tps)
        try:
            yield
        finally:
            self._count.subtract(tps)
            self._count += Counter()  # in place: drops those nobody waits on any more


@dataclass(frozen=True)
class Linger:
    """A follower's fetch, once it has bytes, waits `ms` more for others to join them (one
    round trip for several appends) unless `urgent(tp)`: an acks=all produce waits on `tp`,
    and every millisecond the follower waits is the producer's. Not Kafka's: its leader answers
    a follower as soon as replica.fetch.min.bytes (1) are there (reference §3.7); in Python
    each round trip costs ~0.5 ms of CPU (bench/profiles/half-load.md), so with acks=1 the HW
    may trail by up to `ms` instead."""

    ms: int
    urgent: Callable[[TopicPartition], bool]


class DelayedFetch(DelayedOperation[dict[TopicPartition, FetchPartitionResult]]):
    """Waits until `min_bytes` are readable or a partition errors, then reads every partition
    with the current HW (the follower's fetch state is not updated again, reference §3.7).

    It starts from what the fetch's own read found, and, like Kafka's DelayedFetch, keeps what
    each partition has readable: when one partition changes it looks at that one only, so a
    follower's fetch of 10,000 partitions is not re-read whole on every append to one of them.
    (It is created and watched in the same step of the loop as that read: nothing can change
    in between.) With a `linger`, enough bytes complete it `linger.ms` later, or at once if
    a partition that changed is urgent."""

    def __init__(
        self,
        timeout_ms: int,
        min_bytes: int,
        readable: Callable[[TopicPartition, int], int | None],
        read: Callable[[list[TopicPartition]], dict[TopicPartition, FetchPartitionResult]],
        available: Mapping[TopicPartition, int],
        changed: Iterable[TopicPartition] = (),
        linger: Linger | None = None,
    ) -> None:
        super().__init__(timeout_ms)
        self._linger = linger
        self._linger_timer: asyncio.TimerHandle | None = None
        self._min_bytes = min_bytes
        self._readable = readable  # bytes readable now (up to a limit); None: an error
        self._read = read  # the answer, reading again the partitions that changed
        # What the fetch's own read found (it was not enough): partitions with bytes only.
        self._available = {tp: n for tp, n in available.items() if n}
        self._total = sum(self._available.values())
        self._changed = dict.fromkeys(changed)  # in the order they changed

    def try_complete(
        self, changed: TopicPartition | None
    ) -> dict[TopicPartition, FetchPartitionResult] | None:
        if changed is not None:
            self._changed[changed] = None
            got = self._readable(changed, self._min_bytes)
            if got is None:
                return self._read(list(self._changed))
            self._total += got - self._available.get(changed, 0)
            self._available[changed] = got
        if self._total < self._min_bytes:
            return None
        if self._linger is None or any(map(self._linger.urgent, self._changed)):
            return self._read(list(self._changed))
        if self._linger_timer is None:
            loop = asyncio.get_running_loop()
            self._linger_timer = loop.call_later(self._linger.ms / 1000, self._linger_over)
        return None

    def _linger_over(self) -> None:
        if not self.done:
            self._finish(self._read(list(self._changed)))

    def _finish(self, result: dict[TopicPartition, FetchPartitionResult]) -> None:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        super()._finish(result)

    def on_expiration(self) -> dict[TopicPartition, FetchPartitionResult]:
        if self._linger_timer is not None:
            self._linger_timer.cancel()
        return self._read(list(self._changed))
