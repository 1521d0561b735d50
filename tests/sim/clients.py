"""Simulated clients. The producer sends small batches of unique records with acks=all (and
some acks=1) to the leader its metadata names, and tells the checker what was acknowledged;
the consumer reads each partition up to the HW and tells the checker what it read. Both learn
leaders from any broker's metadata cache, so they can be stale and talk to a deposed leader —
which is exactly what the checker needs to see."""

from __future__ import annotations

import random
from functools import partial
from typing import TYPE_CHECKING, Any

from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition
from tests.sim.messages import (
    FetchRequest,
    FetchResponse,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    ProduceResponse,
)
from tests.sim.process import Process
from tests.sim.tokens import batch_tokens, first_offset

if TYPE_CHECKING:
    from tests.sim.runner import Cluster

MAX_IN_FLIGHT = 2


class Client(Process):
    def __init__(self, cluster: Cluster, node_id: int) -> None:
        super().__init__(cluster.kernel, cluster.net, node_id)
        self.cluster = cluster
        self.cfg = cluster.cfg
        self.checker = cluster.checker
        self.rng = random.Random(f"client-{cluster.cfg.seed}-{node_id}")
        self.leaders: dict[TopicPartition, int] = {}
        self.in_flight: dict[TopicPartition, int] = {}
        self.refreshing = False

    def start(self) -> None:
        super().start()
        self.leaders, self.in_flight, self.refreshing = {}, {}, False
        self.refresh_metadata()

    def on_message(self, src: int, msg: Any) -> None:
        self.take_response(msg)

    def refresh_metadata(self) -> None:
        if self.refreshing:
            return
        self.refreshing = True
        broker = self.rng.choice(self.cfg.brokers)
        req = MetadataRequest(self.kernel.next_id())
        self.request(broker, req, self._on_metadata, self.cfg.rpc_timeout_ms)

    def _on_metadata(self, r: MetadataResponse | None) -> None:
        self.refreshing = False
        if r is None:
            self.later(50, self.refresh_metadata)
            return
        for tp, leader, _epoch in r.leaders:
            if leader >= 0:
                self.leaders[tp] = leader


class SimProducer(Client):
    def __init__(self, cluster: Cluster, node_id: int) -> None:
        super().__init__(cluster, node_id)
        self.sequence = 0
        self.paused_until = 0

    def start(self) -> None:
        super().start()
        interval = self.cfg.produce_interval_ms
        self.every(interval, self.rng.randrange(interval), self._tick)

    def pause(self, ms: int) -> None:
        """Stop producing for a while: an idle partition (followers at the leader's LEO)."""
        self.paused_until = self.kernel.now + ms

    def _tick(self) -> None:
        if self.kernel.now < self.paused_until:
            return
        for tp in self.cfg.partitions:
            if self.in_flight.get(tp, 0) < MAX_IN_FLIGHT:
                self._send(tp)

    def _send(self, tp: TopicPartition) -> None:
        leader = self.leaders.get(tp)
        if leader is None:
            self.refresh_metadata()
            return
        values = []
        for _ in range(1 + self.rng.randrange(3)):
            self.sequence += 1
            values.append(NewRecord(None, b"%d-%d" % (self.id, self.sequence)))
        data = build_batch(values, base_timestamp=self.kernel.now)
        acks = 1 if self.rng.random() < self.cfg.acks_one_share else -1
        req = ProduceRequest(self.kernel.next_id(), tp, acks, data)
        self.in_flight[tp] = self.in_flight.get(tp, 0) + 1
        timeout = self.cfg.produce_timeout_ms + self.cfg.rpc_timeout_ms
        self.request(leader, req, lambda r: self._on_response(req, r), timeout)

    def _on_response(self, req: ProduceRequest, r: ProduceResponse | None) -> None:
        self.in_flight[req.tp] -= 1
        if r is None or r.error is not ErrorCode.NONE:
            self.refresh_metadata()
            return
        if req.acks == -1:
            tokens = batch_tokens(req.records, r.leader_epoch)
            self.checker.on_ack(req.tp, r.base_offset, tokens)


class SimConsumer(Client):
    def __init__(self, cluster: Cluster, node_id: int) -> None:
        super().__init__(cluster, node_id)
        self.positions: dict[TopicPartition, int] = {}

    def start(self) -> None:
        super().start()
        interval = self.cfg.consume_interval_ms
        self.every(interval, self.rng.randrange(interval), self._tick)

    def _tick(self) -> None:
        for tp in self.cfg.partitions:
            leader = self.leaders.get(tp)
            if leader is None:
                self.refresh_metadata()
            elif not self.in_flight.get(tp):
                position = self.positions.get(tp, 0)
                req = FetchRequest(self.kernel.next_id(), -1, tp, position, -1, -1, 4096)
                self.in_flight[tp] = 1
                timeout = self.cfg.rpc_timeout_ms + self.cfg.fetch_wait_ms
                self.request(leader, req, partial(self._on_data, tp), timeout)

    def _on_data(self, tp: TopicPartition, r: FetchResponse | None) -> None:
        self.in_flight[tp] = 0
        if r is None or r.error is not ErrorCode.NONE:
            if r is not None and r.error is ErrorCode.OFFSET_OUT_OF_RANGE:
                self.positions[tp] = 0
            self.refresh_metadata()
            return
        if r.records:
            base = first_offset(r.records)
            tokens = batch_tokens(r.records)
            self.checker.on_consume(tp, base, tokens, r.high_watermark)
            self.positions[tp] = base + len(tokens)
        if self.rng.random() < 0.03:
            # Read again from an earlier offset: what was read once must read the same.
            self.positions[tp] = self.rng.randrange(self.positions.get(tp, 0) + 1)
