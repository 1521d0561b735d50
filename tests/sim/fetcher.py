"""A simulated broker's follower side, as broker/fetch/fetcher.py: per followed partition, a
truncation phase (OffsetsForLeaderEpoch, or the local HW when the mode says so) and then one
fetch at a time, appending what the leader returns and taking its HW (reference §3.8, §4.4,
§4.5). Every decision comes from broker.replication.truncation and the Partition."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

# RETRY_LATER: the real follower's rule (back off and retry; other errors drop the partition
# until the next LeaderAndIsr).
from broker.fetch.follower_state import RETRY_LATER, backoff_ms_for
from broker.replication.truncation import (
    decide_from_epoch_answer,
    decide_out_of_range,
    epoch_to_ask,
    truncate_to_high_watermark,
    truncation_mode,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.records import RecordError
from minibroker.core.types import TopicPartition
from tests.sim.messages import (
    EpochRequest,
    EpochResponse,
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from tests.sim.tokens import batch_tokens

if TYPE_CHECKING:
    from tests.sim.broker import Hosted, SimBroker


@dataclass(eq=False)
class FetchState:
    leader: int
    leader_epoch: int
    fetch_offset: int
    truncating: bool = True


class Fetcher:
    def __init__(self, broker: SimBroker) -> None:
        self.b = broker
        self.mode = truncation_mode(broker.cfg.bug)
        self.states: dict[TopicPartition, FetchState] = {}

    def clear(self) -> None:
        self.states = {}

    def add(self, tp: TopicPartition, leader: int, leader_epoch: int, fetch_offset: int) -> None:
        st = self.states[tp] = FetchState(leader, leader_epoch, fetch_offset)
        self.b.hosted[tp].fetch = st
        self._next(tp, st)

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)
        hosted = self.b.hosted.get(tp)
        if hosted is not None:
            hosted.fetch = None

    def _current(self, tp: TopicPartition, st: FetchState) -> Hosted | None:
        if self.states.get(tp) is not st:
            return None  # replaced or removed meanwhile: drop the answer
        return self.b.hosted.get(tp)

    def _next(self, tp: TopicPartition, st: FetchState) -> None:
        hosted = self._current(tp, st)
        if hosted is None:
            return
        if st.truncating:
            self._truncate(tp, st, hosted)
        else:
            self._fetch(tp, st, hosted)

    def _backoff(self, tp: TopicPartition, st: FetchState, error: ErrorCode | None = None) -> None:
        delay_ms = backoff_ms_for(error, self.b.cfg.fetch_backoff_ms)
        self.b.later(delay_ms, self._next, tp, st)

    def _fail(self, tp: TopicPartition, st: FetchState) -> None:
        if self.states.get(tp) is st:
            self.remove(tp)

    # ---- truncation ------------------------------------------------------------------------

    def _truncate(self, tp: TopicPartition, st: FetchState, hosted: Hosted) -> None:
        epoch = epoch_to_ask(self.mode, hosted.log.epoch_cache)
        if epoch is None:
            d = truncate_to_high_watermark(st.fetch_offset, hosted.log.log_end_offset)
            self._apply_truncation(st, hosted, d.offset, done=True)
            self._next(tp, st)
            return
        req = EpochRequest(self.b.kernel.next_id(), tp, st.leader_epoch, epoch)
        self.b.request(
            st.leader,
            req,
            lambda r: self._on_epoch_answer(tp, st, r),
            self.b.cfg.rpc_timeout_ms,
        )

    def _on_epoch_answer(self, tp: TopicPartition, st: FetchState, r: EpochResponse | None) -> None:
        hosted = self._current(tp, st)
        if hosted is None:
            return
        if r is None or r.error in RETRY_LATER:
            self._backoff(tp, st, None if r is None else r.error)
            return
        if r.error is not ErrorCode.NONE:
            self._fail(tp, st)  # FENCED_LEADER_EPOCH: wait for the next LeaderAndIsr
            return
        decision = decide_from_epoch_answer(
            leader_epoch=r.leader_epoch,
            leader_end_offset=r.end_offset,
            cache=hosted.log.epoch_cache,
            log_end_offset=hosted.log.log_end_offset,
            initial_fetch_offset=st.fetch_offset,
        )
        self._apply_truncation(st, hosted, decision.offset, decision.done)
        self._next(tp, st)

    def _apply_truncation(self, st: FetchState, hosted: Hosted, offset: int, done: bool) -> None:
        log = hosted.log
        if offset < log.log_end_offset:
            self.b.kernel.note(
                f"broker {self.b.id} truncates {hosted.partition.tp} from "
                f"{log.log_end_offset} to {offset} ({self.mode.value})"
            )
            log.truncate_to(offset)
            hosted.partition.on_truncate(log.log_end_offset)
            del hosted.shadow[log.log_end_offset :]
        if done:
            st.truncating = False
            st.fetch_offset = log.log_end_offset

    # ---- fetching --------------------------------------------------------------------------

    def _fetch(self, tp: TopicPartition, st: FetchState, hosted: Hosted) -> None:
        b = self.b
        req = FetchRequest(
            b.kernel.next_id(),
            b.id,
            tp,
            st.fetch_offset,
            st.leader_epoch,
            hosted.log.log_start_offset,
            b.cfg.replica_fetch_max_bytes,
        )
        asked = st.fetch_offset
        timeout = b.cfg.fetch_wait_ms + b.cfg.rpc_timeout_ms
        b.request(st.leader, req, lambda r: self._on_data(tp, st, asked, r), timeout)

    def _on_data(
        self, tp: TopicPartition, st: FetchState, asked: int, r: FetchResponse | None
    ) -> None:
        hosted = self._current(tp, st)
        if hosted is None or st.fetch_offset != asked:
            return
        if r is None or r.error in RETRY_LATER:
            self._backoff(tp, st, None if r is None else r.error)
        elif r.error is ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, st)
        elif r.error is not ErrorCode.NONE:
            self._fail(tp, st)
        else:
            log, p = hosted.log, hosted.partition
            if r.records:
                try:
                    log.append_as_follower(r.records)
                except RecordError:
                    self._backoff(tp, st)
                    return
                hosted.shadow.extend(batch_tokens(r.records))
            p.update_follower_high_watermark(r.high_watermark, log)
            st.fetch_offset = log.log_end_offset
            self._fetch(tp, st, hosted)

    def _out_of_range(self, tp: TopicPartition, st: FetchState) -> None:
        """Reference §4.5: ask the leader for its LEO and log start, then decide."""
        req = ListOffsetsRequest(self.b.kernel.next_id(), tp, st.leader_epoch)
        self.b.request(
            st.leader, req, lambda r: self._on_offsets(tp, st, r), self.b.cfg.rpc_timeout_ms
        )

    def _on_offsets(
        self, tp: TopicPartition, st: FetchState, r: ListOffsetsResponse | None
    ) -> None:
        hosted = self._current(tp, st)
        if hosted is None:
            return
        if r is None or r.error is not ErrorCode.NONE:
            self._backoff(tp, st)
            return
        log = hosted.log
        d = decide_out_of_range(
            leader_log_end_offset=r.log_end_offset,
            leader_log_start_offset=r.log_start_offset,
            log_end_offset=log.log_end_offset,
        )
        if d.restart_at is not None:
            raise AssertionError("the simulation never deletes old segments")
        if d.truncate_to is not None:
            log.truncate_to(d.truncate_to)
            del hosted.shadow[log.log_end_offset :]
            self.b.checker.on_unclean_truncation(self.b, tp, st.leader, r.log_end_offset)
        hosted.partition.on_truncate(log.log_end_offset)
        st.fetch_offset = d.fetch_offset
        self._fetch(tp, st, hosted)
