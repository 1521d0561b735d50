"""The client's view of the cluster (brokers, leaders, epochs, ISR), refreshed through the
Metadata RPC of any known broker. The cache never goes back in time: an answer with an older
leader epoch than cached is ignored (KIP-320), as brokers answer from their own caches.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from minibroker.client.channels import ChannelPool, RpcFailure, parse_bootstrap
from minibroker.client.errors import NoBrokerAvailable, UnknownTopicError
from minibroker.core.errors import ErrorCode
from minibroker.core.types import NO_LEADER, TopicPartition
from minibroker.rpc import broker_pb2
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import monotonic_ms
from minibroker.runtime.wire import error_from_wire


@dataclass(frozen=True)
class BrokerNode:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


@dataclass(frozen=True)
class PartitionMetadata:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()
    error: ErrorCode = ErrorCode.NONE

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class TopicMetadata:
    name: str
    error: ErrorCode
    partitions: tuple[PartitionMetadata, ...] = ()


@dataclass(frozen=True)
class MetadataSnapshot:
    """One Metadata response, as plain values."""

    brokers: tuple[BrokerNode, ...]
    controller_id: int
    topics: tuple[TopicMetadata, ...]


def parse_metadata_response(resp: Any) -> MetadataSnapshot:
    """A MetadataResponse message as a MetadataSnapshot."""
    topics = tuple(
        TopicMetadata(
            name=t.name,
            error=error_from_wire(t.error_code),
            partitions=tuple(
                PartitionMetadata(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=p.leader_id,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    offline_replicas=tuple(p.offline_replicas),
                    error=error_from_wire(p.error_code),
                )
                for p in t.partitions
            ),
        )
        for t in resp.topics
    )
    brokers = tuple(BrokerNode(b.node_id, b.host, b.port) for b in resp.brokers)
    return MetadataSnapshot(brokers, resp.controller_id, topics)


class ClusterMetadata:
    """Brokers and partition leadership as last heard; pure (time is an argument)."""

    def __init__(self) -> None:
        self.brokers: dict[int, BrokerNode] = {}
        self.controller_id = -1
        self.updated_ms: int | None = None
        self._partitions: dict[str, dict[int, PartitionMetadata]] = {}
        self._topic_errors: dict[str, ErrorCode] = {}

    def update(self, snapshot: MetadataSnapshot, now_ms: int) -> None:
        """Take in a Metadata answer; topics it does not mention keep what we knew."""
        self.brokers = {b.node_id: b for b in snapshot.brokers}
        self.controller_id = snapshot.controller_id
        self.updated_ms = now_ms
        for topic in snapshot.topics:
            if topic.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                self._partitions.pop(topic.name, None)
                self._topic_errors[topic.name] = topic.error
                continue
            if topic.error is ErrorCode.NONE:
                self._topic_errors.pop(topic.name, None)
            else:
                self._topic_errors[topic.name] = topic.error
            if topic.partitions:
                old = self._partitions.get(topic.name, {})
                self._partitions[topic.name] = {
                    p.partition: _newer(old.get(p.partition), p) for p in topic.partitions
                }

    def invalidate(self, tp: TopicPartition) -> None:
        """Forget `tp`'s leader after NOT_LEADER_OR_FOLLOWER and the like, keeping its epoch so
        that an older answer cannot bring the old leader back."""
        p = self._partitions.get(tp.topic, {}).get(tp.partition)
        if p is not None and p.leader != NO_LEADER:
            self._partitions[tp.topic][tp.partition] = replace(p, leader=NO_LEADER)

    def partition(self, tp: TopicPartition) -> PartitionMetadata | None:
        return self._partitions.get(tp.topic, {}).get(tp.partition)

    def leader_for(self, tp: TopicPartition) -> BrokerNode | None:
        """The live broker leading `tp`, or None when unknown, leaderless or not live."""
        p = self.partition(tp)
        if p is None or p.leader < 0:
            return None
        return self.brokers.get(p.leader)

    def leader_epoch(self, tp: TopicPartition) -> int | None:
        p = self.partition(tp)
        return None if p is None or p.leader_epoch < 0 else p.leader_epoch

    def partitions_for(self, topic: str) -> list[int] | None:
        """The topic's partition numbers, or None while the topic is not known to exist."""
        parts = self._partitions.get(topic)
        return sorted(parts) if parts else None

    def partition_count(self, topic: str) -> int | None:
        """How many partitions the topic has, or None while it is not known to exist (asked
        for every record sent: no list is made)."""
        parts = self._partitions.get(topic)
        return len(parts) if parts else None

    def available_partitions(self, topic: str) -> list[int]:
        """Partitions whose leader is known and live."""
        parts = self._partitions.get(topic, {})
        return [n for n, p in sorted(parts.items()) if p.leader >= 0 and p.leader in self.brokers]

    def topic_error(self, topic: str) -> ErrorCode | None:
        return self._topic_errors.get(topic)

    def age_ms(self, now_ms: int) -> int | None:
        return None if self.updated_ms is None else now_ms - self.updated_ms


def _newer(old: PartitionMetadata | None, new: PartitionMetadata) -> PartitionMetadata:
    # A broker with a stale cache may answer with an older epoch; the newer view wins.
    if old is not None and new.leader_epoch < old.leader_epoch:
        return old
    return new


def refresh_candidates(
    known: Iterable[str],
    bootstrap: Sequence[str],
    failed_ms: Mapping[str, int],
    in_flight: Mapping[str, int],
    *,
    suspect: Collection[str] = (),
    start: int = 0,
) -> list[str]:
    """Addresses to ask for metadata, best first (Kafka's least loaded node, roughly): brokers
    that never failed before those that did, oldest failure first; a suspect (a leader that
    just timed out a write, whose own view may be the stale one) after the others; then those
    with the fewest calls awaiting an answer, so that a hung broker holding a call is asked
    last; ties from the `start`-th address on, as Kafka starts from a random node."""
    ordered = list(dict.fromkeys([*known, *bootstrap]))
    n = len(ordered) or 1
    rank = {a: (i - start) % n for i, a in enumerate(ordered)}
    return sorted(
        ordered,
        key=lambda a: (
            a in failed_ms,
            failed_ms.get(a, 0),
            a in suspect,
            in_flight.get(a, 0),
            rank[a],
        ),
    )


class MetadataClient:
    """Keeps a ClusterMetadata fresh: on demand, after errors, and every metadata_max_age_ms."""

    def __init__(
        self,
        bootstrap: Sequence[str],
        channels: ChannelPool,
        *,
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        metadata_max_age_ms: int = 300000,
    ) -> None:
        self.cache = ClusterMetadata()
        self._bootstrap = list(bootstrap)
        self._channels = channels
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._metadata_max_age_ms = metadata_max_age_ms
        self._topics: set[str] = set()
        self._failed_ms: dict[str, int] = {}
        self._task: asyncio.Task[None] | None = None
        self._update_requested = False
        self._last_attempt_ms: int | None = None
        self._suspect: set[str] = set()
        self._refreshes = 0

    def add_topics(self, topics: Iterable[str]) -> None:
        """Topics this client uses; metadata requests ask for exactly these."""
        new = set(topics) - self._topics
        if new:
            self._topics |= new
            self._update_requested = True

    def mark_failed(self, address: str) -> None:
        """A call to `address` failed at the gRPC level: ask others first, and refresh."""
        self._failed_ms[address] = monotonic_ms()
        self._update_requested = True

    def request_update(self, tp: TopicPartition | None = None, suspect: str | None = None) -> None:
        """Refresh soon; with `tp`, its leader is forgotten until then; with `suspect`, that
        broker is asked only if the others do not answer (its view may be what is stale)."""
        if tp is not None:
            self.cache.invalidate(tp)
        if suspect is not None:
            self._suspect.add(suspect)
        self._update_requested = True

    async def refresh(self) -> None:
        """Fetch metadata now, sharing a refresh already under way; NoBrokerAvailable if no
        known broker answers."""
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._refresh_once())
            self._task.add_done_callback(_retrieve)
        await asyncio.shield(self._task)

    def maybe_refresh(self, now_ms: int) -> bool:
        """Start a background refresh if one is due and not backing off; whether it did."""
        if self._task is not None and not self._task.done():
            return False
        age = self.cache.age_ms(now_ms)
        due = self._update_requested or age is None or age >= self._metadata_max_age_ms
        recent = (
            self._last_attempt_ms is not None
            and now_ms - self._last_attempt_ms < self._retry_backoff_ms
        )
        if not due or recent:
            return False
        self._task = asyncio.create_task(self._refresh_once())
        self._task.add_done_callback(_retrieve)
        return True

    async def wait_for_topic(self, topic: str, timeout_ms: int) -> list[int]:
        """The topic's partitions, refreshing until it is known or `timeout_ms` passes."""
        self.add_topics([topic])
        deadline = monotonic_ms() + timeout_ms
        while True:
            parts = self.cache.partitions_for(topic)
            if parts:
                return parts
            error: Exception | None = None
            try:
                await self.refresh()
            except NoBrokerAvailable as exc:
                error = exc
            parts = self.cache.partitions_for(topic)
            if parts:
                return parts
            if monotonic_ms() >= deadline:
                raise error or UnknownTopicError(topic)
            await asyncio.sleep(self._retry_backoff_ms / 1000)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _refresh_once(self) -> None:
        self._update_requested = False
        self._last_attempt_ms = monotonic_ms()
        known = [b.address for b in self.cache.brokers.values()]
        request = broker_pb2.MetadataRequest(topics=sorted(self._topics))
        failures = []
        in_flight = {a: self._channels.in_flight(a) for a in [*known, *self._bootstrap]}
        suspect, self._suspect = self._suspect, set()
        candidates = refresh_candidates(
            known,
            self._bootstrap,
            self._failed_ms,
            in_flight,
            suspect=suspect,
            start=self._refreshes,  # the first refresh asks the first bootstrap address
        )
        self._refreshes += 1
        for address in candidates:
            try:
                resp = await self._channels.call(
                    address, "Metadata", request, self._request_timeout_ms
                )
            except RpcFailure as exc:
                self._failed_ms[address] = monotonic_ms()
                failures.append(str(exc))
                continue
            snapshot = parse_metadata_response(resp)
            if not snapshot.brokers:
                # A broker that has not had its first UpdateMetadata knows nothing yet; Kafka's
                # client ignores such an answer too, rather than forget every leader.
                failures.append(f"broker {address}: no brokers in its metadata yet")
                continue
            self._failed_ms.pop(address, None)
            self.cache.update(snapshot, monotonic_ms())
            return
        self._update_requested = True
        raise NoBrokerAvailable("no broker reachable: " + "; ".join(failures))


def _retrieve(task: asyncio.Task[None]) -> None:
    # Background refreshes report failures through the next caller, not as unretrieved errors.
    if not task.cancelled() and task.exception() is not None:
        slog.event("client_metadata_refresh_failed", logging.DEBUG, error=str(task.exception()))


def connect(
    bootstrap: str | Sequence[str],
    channels: ChannelPool | None,
    *,
    request_timeout_ms: int,
    retry_backoff_ms: int,
    metadata_max_age_ms: int,
) -> tuple[bool, ChannelPool, MetadataClient]:
    """A client's channel pool and metadata client: (owns the pool, pool, metadata). A pool
    passed in is shared with other clients and stays open when this client closes."""
    pool = channels or ChannelPool()
    metadata = MetadataClient(
        parse_bootstrap(bootstrap),
        pool,
        request_timeout_ms=request_timeout_ms,
        retry_backoff_ms=retry_backoff_ms,
        metadata_max_age_ms=metadata_max_age_ms,
    )
    return channels is None, pool, metadata
