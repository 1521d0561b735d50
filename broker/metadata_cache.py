"""The broker's metadata cache: live brokers and partition states as the controller last sent
them in UpdateMetadata (reference §3.4, §5.9). Metadata requests are answered from it, and
makeFollowers consults it for the leader's liveness (pitfall 17)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from minibroker.core.listeners import Endpoint
from minibroker.core.types import LEADER_DURING_DELETE, TopicPartition


@dataclass(frozen=True)
class LiveBroker:
    """A live broker as UpdateMetadata named it: `host`/`port` is the endpoint of this broker's
    inter-broker listener (what followers fetch from); `endpoints` are all its listeners."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    endpoints: tuple[Endpoint, ...] = ()

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def endpoint_for(self, listener: str) -> Endpoint | None:
        """The endpoint a client connected on `listener` is given (Kafka: the same listener)."""
        if not self.endpoints:
            return Endpoint(listener, self.host, self.port)
        return next((e for e in self.endpoints if e.listener == listener), None)


@dataclass(frozen=True)
class PartitionMetadata:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    offline_replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


@dataclass
class MetadataCache:
    controller_id: int = -1
    brokers: dict[int, LiveBroker] = field(default_factory=dict)
    partitions: dict[TopicPartition, PartitionMetadata] = field(default_factory=dict)
    # Woken by every update: admin requests wait for their change to reach this cache, as
    # Kafka's delayed topic operations wait on the metadata cache.
    _waiters: list[asyncio.Future[None]] = field(default_factory=list)
    # Told the partitions each update deleted (KafkaApis hands them to the group coordinator).
    deleted_listeners: list[Callable[[list[TopicPartition]], None]] = field(default_factory=list)

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Until `condition()` holds after an update (or already does); False on timeout."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not condition():
            remaining = deadline - loop.time()
            if remaining <= 0:
                return False
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append(waiter)
            try:
                async with asyncio.timeout(remaining):
                    await asyncio.shield(waiter)
            except TimeoutError:
                return condition()
            finally:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)
        return True

    def update(
        self,
        controller_id: int,
        live_brokers: Iterable[LiveBroker],
        partition_states: Iterable[tuple[TopicPartition, PartitionMetadata]],
    ) -> list[TopicPartition]:
        """Apply one UpdateMetadata: the live brokers are replaced; the partitions it names are
        replaced, and a leader of -2 (topic being deleted) removes them. Returns the deleted."""
        self.controller_id = controller_id
        self.brokers = {b.broker_id: b for b in live_brokers}
        deleted = []
        for tp, state in partition_states:
            if state.leader == LEADER_DURING_DELETE:
                self.partitions.pop(tp, None)
                deleted.append(tp)
            else:
                self.partitions[tp] = state
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)
        if deleted:
            for listener in self.deleted_listeners:
                listener(deleted)
        return deleted

    def is_alive(self, broker_id: int) -> bool:
        return broker_id in self.brokers

    def topics(self) -> list[str]:
        return sorted({tp.topic for tp in self.partitions})

    def partitions_of(self, topic: str) -> list[tuple[TopicPartition, PartitionMetadata]]:
        return sorted((tp, s) for tp, s in self.partitions.items() if tp.topic == topic)

    def partitions_by_topic(
        self, topics: Iterable[str] | None = None
    ) -> dict[str, list[tuple[TopicPartition, PartitionMetadata]]]:
        """partitions_of for each of `topics` that has partitions (None: every topic), in one
        pass over the cache: a Metadata request may name thousands of topics, and a pass each
        would block the loop for seconds."""
        wanted = None if topics is None else set(topics)
        out: dict[str, list[tuple[TopicPartition, PartitionMetadata]]] = {}
        for tp, state in self.partitions.items():
            if wanted is None or tp.topic in wanted:
                out.setdefault(tp.topic, []).append((tp, state))
        for found in out.values():
            found.sort(key=lambda entry: entry[0].partition)
        return out
