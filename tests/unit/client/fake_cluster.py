"""An in-memory cluster behind a ChannelPool, with Kafka's answers (leaders, epochs, HW, error
codes) and no network: one replica per partition, so the HW is the log end. Tests move
leaders, stop brokers and queue error codes to see the client cope.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.core.batch_validation import validate_and_stamp
from minibroker.core.errors import ErrorCode
from minibroker.core.records import RecordError
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2
from minibroker.runtime.wire import error_to_wire


@dataclass
class FakePartition:
    leader: int
    leader_epoch: int = 0
    batches: list[bytes] = field(default_factory=list)
    offsets: list[tuple[int, int]] = field(default_factory=list)  # (base, next) per batch
    log_start_offset: int = 0

    @property
    def log_end_offset(self) -> int:
        return self.offsets[-1][1] if self.offsets else self.log_start_offset


class FakeCluster(ChannelPool):
    def __init__(self, brokers: int = 3) -> None:
        super().__init__()
        self.addresses = {i: f"broker{i}:{9090 + i}" for i in range(1, brokers + 1)}
        self.down: set[int] = set()
        # Brokers that answer every Produce with REQUEST_TIMED_OUT: an old leader cut off from
        # its followers, its HW stuck, that has not yet heard it lost leadership.
        self.timing_out: set[int] = set()
        self.partitions: dict[TopicPartition, FakePartition] = {}
        # Error codes to answer instead of serving, per (method, partition), first in first out.
        self.errors: dict[tuple[str, TopicPartition], list[ErrorCode]] = defaultdict(list)
        self.calls: list[tuple[str, str]] = []
        self.produced: list[tuple[TopicPartition, bytes]] = []  # every Produce's batch bytes
        self.fetch_errors_sent: list[ErrorCode] = []
        self.stale_metadata: dict[int, broker_pb2.MetadataResponse] = {}

    # ---- set-up ----------------------------------------------------------------------------

    def create_topic(self, topic: str, partitions: int, leader: int = 1) -> None:
        for p in range(partitions):
            self.partitions[TopicPartition(topic, p)] = FakePartition(leader=leader)

    def move_leader(self, tp: TopicPartition, leader: int) -> None:
        part = self.partitions[tp]
        part.leader = leader
        part.leader_epoch += 1

    def records_in(self, tp: TopicPartition) -> bytes:
        return b"".join(self.partitions[tp].batches)

    # ---- the ChannelPool interface -----------------------------------------------------------

    async def call(self, address: str, method: str, request: Any, timeout_ms: int) -> Any:
        self.calls.append((address, method))
        broker = next(i for i, a in self.addresses.items() if a == address)
        await asyncio.sleep(0)
        if broker in self.down:
            raise RpcFailure(address, "UNAVAILABLE", "connection refused")
        handler = getattr(self, f"_{method.lower()}")
        return await handler(broker, request)

    async def close(self) -> None:
        pass

    # ---- handlers ------------------------------------------------------------------------------

    def _injected(self, method: str, tp: TopicPartition) -> ErrorCode | None:
        queue = self.errors.get((method, tp))
        return queue.pop(0) if queue else None

    async def _metadata(self, broker: int, req: Any) -> Any:
        if broker in self.stale_metadata:
            return self.stale_metadata[broker]
        live = [i for i in self.addresses if i not in self.down]
        topics = sorted({tp.topic for tp in self.partitions})
        wanted = list(req.topics) or topics
        resp = broker_pb2.MetadataResponse(controller_id=live[0] if live else -1)
        for i in live:
            host, port = self.addresses[i].split(":")
            resp.brokers.add(node_id=i, host=host, port=int(port))
        for name in wanted:
            t = resp.topics.add(name=name)
            if name not in topics:
                t.error_code = error_to_wire(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            for tp, part in sorted(self.partitions.items()):
                if tp.topic == name:
                    leader = part.leader if part.leader in live else -1
                    t.partitions.add(
                        partition_index=tp.partition,
                        leader_id=leader,
                        leader_epoch=part.leader_epoch,
                        replica_nodes=[part.leader],
                        isr_nodes=[part.leader],
                        error_code=ErrorCode.NONE
                        if leader >= 0
                        else ErrorCode.LEADER_NOT_AVAILABLE,
                    )
        return resp

    def _leader_error(self, broker: int, tp: TopicPartition, method: str) -> ErrorCode:
        injected = self._injected(method, tp)
        if injected is not None:
            return injected
        if method == "Produce" and broker in self.timing_out:
            return ErrorCode.REQUEST_TIMED_OUT
        part = self.partitions.get(tp)
        if part is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if part.leader != broker:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    async def _produce(self, broker: int, req: Any) -> Any:
        resp = broker_pb2.ProduceResponse()
        for t in req.topics:
            out = resp.responses.add(name=t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                self.produced.append((tp, p.records))
                code = self._leader_error(broker, tp, "Produce")
                base = -1
                if code is ErrorCode.NONE:
                    code, base = self._append(tp, p.records)
                out.partitions.add(
                    partition_index=p.partition_index, error_code=code, base_offset=base
                )
        return broker_pb2.ProduceResponse() if req.acks == 0 else resp

    def _append(self, tp: TopicPartition, records: bytes) -> tuple[ErrorCode, int]:
        part = self.partitions[tp]
        try:
            stamped = validate_and_stamp(
                records,
                next_offset=part.log_end_offset,
                partition_leader_epoch=part.leader_epoch,
                max_batch_bytes=1 << 20,
            )
        except RecordError as exc:
            return exc.code, -1
        part.batches.append(stamped.data)
        part.offsets.append((stamped.first_offset, stamped.last_offset + 1))
        return ErrorCode.NONE, stamped.first_offset

    async def _fetch(self, broker: int, req: Any) -> Any:
        resp = broker_pb2.FetchResponse()
        any_data = False
        for t in req.topics:
            out = resp.responses.add(topic=t.topic)
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition)
                data = out.partitions.add(partition_index=p.partition)
                code = self._leader_error(broker, tp, "Fetch")
                part = self.partitions.get(tp)
                if code is ErrorCode.NONE and part is not None:
                    code = self._epoch_error(part, p)
                if code is ErrorCode.NONE and part is not None:
                    code = self._read(part, p.fetch_offset, data)
                    any_data = any_data or bool(data.records)
                data.error_code = error_to_wire(code)
                if code is not ErrorCode.NONE:
                    self.fetch_errors_sent.append(code)
        if not any_data:
            await asyncio.sleep(min(req.max_wait_ms, 5) / 1000)  # a short long-poll
        return resp

    def _epoch_error(self, part: FakePartition, p: Any) -> ErrorCode:
        if not p.HasField("current_leader_epoch"):
            return ErrorCode.NONE
        if p.current_leader_epoch < part.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if p.current_leader_epoch > part.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def _read(self, part: FakePartition, offset: int, data: Any) -> ErrorCode:
        hw = part.log_end_offset
        data.high_watermark = hw
        data.log_start_offset = part.log_start_offset
        if not part.log_start_offset <= offset <= hw:
            return ErrorCode.OFFSET_OUT_OF_RANGE
        data.records = b"".join(
            b for b, (_, nxt) in zip(part.batches, part.offsets, strict=True) if nxt > offset
        )
        return ErrorCode.NONE

    async def _listoffsets(self, broker: int, req: Any) -> Any:
        resp = broker_pb2.ListOffsetsResponse()
        for t in req.topics:
            out = resp.topics.add(name=t.name)
            for p in t.partitions:
                tp = TopicPartition(t.name, p.partition_index)
                code = self._leader_error(broker, tp, "ListOffsets")
                offset = -1
                if code is ErrorCode.NONE:
                    part = self.partitions[tp]
                    offset = part.log_start_offset if p.timestamp == -2 else part.log_end_offset
                out.partitions.add(
                    partition_index=p.partition_index, error_code=code, offset=offset
                )
        return resp
