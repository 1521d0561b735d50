"""A simulated broker's leader side, as the fetch and produce paths of
broker/replica_manager.py: appends, reads for followers and consumers, OffsetsForLeaderEpoch
and ListOffsets answers, and the purgatory of produces waiting for the HW and fetches waiting
for data (reference §2.10, §2.11, §3.6, §3.7). Decisions come from the Partition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.log.log_types import OffsetOutOfRange
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from tests.sim.kernel import IDLE
from tests.sim.messages import (
    EpochRequest,
    EpochResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ProduceRequest,
    ProduceResponse,
)
from tests.sim.tokens import batch_tokens

if TYPE_CHECKING:
    from tests.sim.broker import SimBroker


@dataclass(eq=False)
class Parked:
    """A fetch waiting in purgatory for data (Kafka's DelayedFetch)."""

    src: int
    req: FetchRequest


@dataclass(eq=False)
class DelayedProduce:
    src: int
    req_id: int
    base_offset: int
    required_offset: int
    leader_epoch: int


class LeaderSide:
    def __init__(self, broker: SimBroker) -> None:
        self.b = broker
        self.parked: dict[TopicPartition, list[Parked]] = {}
        self.produces: dict[TopicPartition, list[DelayedProduce]] = {}

    def clear(self) -> None:
        self.parked, self.produces = {}, {}

    # ---- produce (reference §2.10, §3.6) ---------------------------------------------------

    def on_produce(self, src: int, req: ProduceRequest) -> None:
        hosted = self.b.hosted.get(req.tp)
        if hosted is None:
            self.b.respond(src, ProduceResponse(req.req_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            return
        p, log = hosted.partition, hosted.log
        error = p.check_append(req.acks)
        if error is not ErrorCode.NONE:
            self.b.respond(src, ProduceResponse(req.req_id, error))
            return
        info = log.append_as_leader(req.records, p.leader_epoch)
        hosted.shadow.extend(batch_tokens(req.records, p.leader_epoch))
        p.maybe_increment_leader_hw(log.log_end_offset, self.b.kernel.now)
        if req.acks != -1:
            ok = ProduceResponse(req.req_id, ErrorCode.NONE, info.first_offset, p.leader_epoch)
            self.b.respond(src, ok)
        else:
            op = DelayedProduce(
                src, req.req_id, info.first_offset, info.last_offset + 1, p.leader_epoch
            )
            self.produces.setdefault(req.tp, []).append(op)
            self.b.later(self.b.cfg.produce_timeout_ms, self._expire_produce, req.tp, op)
        self.partition_changed(req.tp)

    def _expire_produce(self, tp: TopicPartition, op: DelayedProduce) -> object:
        waiting = self.produces.get(tp, [])
        if op not in waiting:
            return IDLE
        waiting.remove(op)
        self.b.respond(op.src, ProduceResponse(op.req_id, ErrorCode.REQUEST_TIMED_OUT))
        return None

    def partition_changed(self, tp: TopicPartition) -> None:
        """LEO, HW or leadership of `tp` changed: re-test what waits on it (purgatory)."""
        hosted = self.b.hosted.get(tp)
        waiting = self.produces.get(tp)
        if waiting and hosted is not None:
            for op in list(waiting):
                done, error = hosted.partition.check_enough_replicas_reach_offset(
                    op.required_offset
                )
                if done:
                    waiting.remove(op)
                    answer = ProduceResponse(op.req_id, error, op.base_offset, op.leader_epoch)
                    self.b.respond(op.src, answer)
        parked = self.parked.get(tp)
        if parked:
            still = []
            for fetch in parked:
                response = self._read(fetch.req)
                if response.records or response.error is not ErrorCode.NONE:
                    self.b.respond(fetch.src, response)
                else:
                    still.append(fetch)
            self.parked[tp] = still

    # ---- fetch (reference §2.11, §3.7) -------------------------------------------------------

    def _read(self, req: FetchRequest) -> FetchResponse:
        hosted = self.b.hosted.get(req.tp)
        if hosted is None:
            return FetchResponse(req.req_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        p, log = hosted.partition, hosted.log
        error = p.check_current_leader_epoch(req.current_leader_epoch)
        if error is ErrorCode.NONE and not p.is_leader:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if error is not ErrorCode.NONE:
            return FetchResponse(req.req_id, error)
        hw, start = p.high_watermark, log.log_start_offset
        limit = None if req.replica_id >= 0 else hw  # consumers read up to the HW only
        try:
            data = log.read(req.fetch_offset, req.max_bytes, limit)
        except OffsetOutOfRange:
            return FetchResponse(req.req_id, ErrorCode.OFFSET_OUT_OF_RANGE, hw, start)
        return FetchResponse(req.req_id, ErrorCode.NONE, hw, start, data)

    def on_fetch(self, src: int, req: FetchRequest) -> None:
        hosted = self.b.hosted.get(req.tp)
        leader_leo = hosted.log.log_end_offset if hosted is not None else -1
        # Read first, then update the follower's state: the response carries the HW from
        # before this fetch (pitfall 4).
        response = self._read(req)
        if req.replica_id >= 0 and response.error is ErrorCode.NONE and hosted is not None:
            self.b.checker.on_follower_fetch(
                self.b, req.tp, req.replica_id, req.fetch_offset, leader_leo
            )
            out = hosted.partition.update_follower_fetch_state(
                req.replica_id,
                fetch_offset=req.fetch_offset,
                log_start_offset=req.log_start_offset,
                fetch_time_ms=self.b.kernel.now,
                leader_end_offset=leader_leo,
                local_leo=hosted.log.log_end_offset,
            )
            if out.propose_isr is not None:
                self.b._write_isr(out.propose_isr)
            if out.hw_changed:
                self.partition_changed(req.tp)
        if response.records or response.error is not ErrorCode.NONE:
            self.b.respond(src, response)
            return
        parked = Parked(src, req)
        self.parked.setdefault(req.tp, []).append(parked)
        self.b.later(self.b.cfg.fetch_wait_ms, self._expire_fetch, req.tp, parked)

    def _expire_fetch(self, tp: TopicPartition, parked: Parked) -> object:
        waiting = self.parked.get(tp, [])
        if parked not in waiting:
            return IDLE
        waiting.remove(parked)
        self.b.respond(parked.src, self._read(parked.req))
        return None

    def on_epoch_request(self, src: int, req: EpochRequest) -> None:
        """OffsetsForLeaderEpoch on the leader (reference §4.4, leader side)."""
        hosted = self.b.hosted.get(req.tp)
        if hosted is None:
            self.b.respond(src, EpochResponse(req.req_id, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
            return
        error = hosted.partition.check_current_leader_epoch(req.current_leader_epoch)
        if error is ErrorCode.NONE and not hosted.partition.is_leader:
            error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if error is not ErrorCode.NONE:
            self.b.respond(src, EpochResponse(req.req_id, error))
            return
        log = hosted.log
        epoch, end = log.epoch_cache.end_offset_for(req.leader_epoch, log.log_end_offset)
        self.b.respond(src, EpochResponse(req.req_id, ErrorCode.NONE, epoch, end))

    def on_list_offsets(self, src: int, req: ListOffsetsRequest) -> None:
        hosted = self.b.hosted.get(req.tp)
        error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if hosted is not None:
            error = hosted.partition.check_current_leader_epoch(req.current_leader_epoch)
            if error is ErrorCode.NONE and not hosted.partition.is_leader:
                error = ErrorCode.NOT_LEADER_OR_FOLLOWER
        if hosted is None or error is not ErrorCode.NONE:
            self.b.respond(src, ListOffsetsResponse(req.req_id, error))
            return
        log = hosted.log
        self.b.respond(
            src,
            ListOffsetsResponse(req.req_id, error, log.log_end_offset, log.log_start_offset),
        )
