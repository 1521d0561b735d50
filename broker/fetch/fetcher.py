"""Follower fetchers (Kafka's ReplicaFetcherThread), one asyncio task per source broker.

Each fetcher first truncates its partitions (OffsetsForLeaderEpoch, reference §4.4), then sends
one Fetch for every partition it follows from that broker, appends what comes back as follower,
and takes the leader's HW clamped to its own log (§3.8). Errors follow §3.8: back off and retry,
or drop the partition until the next LeaderAndIsr.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

import grpc

from broker.fetch.follower_state import (
    RETRY_LATER,
    SESSION_ERRORS,
    THROTTLED_WAIT_S,
    FetchState,
    backoff_ms_for,
)
from broker.fetch.request import follower_fetch_request
from broker.fetch.session_builder import FetchSessionBuilder, PartitionFetchState
from broker.fetch.stream import FetchStream, FetchStreamError
from broker.partition_table import FetcherServices, HostedPartition, PartitionTable
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
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime import logging as slog
from minibroker.runtime.deadlines import wait_set
from minibroker.runtime.grpc_options import channel_options
from minibroker.runtime.wire import error_from_wire

NO_ERROR = int(ErrorCode.NONE)


class FollowerFetcher:
    def __init__(
        self,
        partitions: PartitionTable,
        services: FetcherServices,
        leader_id: int,
        address: str,
    ) -> None:
        self.partitions = partitions
        self.services = services
        self.leader_id = leader_id
        self.address = address
        self.states: dict[TopicPartition, FetchState] = {}
        self.session = FetchSessionBuilder()
        # Partitions whose fetch offset or log start may have moved since the last request,
        # and every partition by topic name and number (answers are matched without building
        # a TopicPartition per answer).
        self._moved: set[TopicPartition] = set()
        self._by_name: dict[str, dict[int, TopicPartition]] = {}
        self._wakeup = asyncio.Event()
        s = services.settings
        self.wait_ms = s.get_int("replica.fetch.wait.max.ms")
        self.min_bytes = s.get_int("replica.fetch.min.bytes")
        self.partition_max_bytes = s.get_int("replica.fetch.max.bytes")
        self.response_max_bytes = s.get_int("replica.fetch.response.max.bytes")
        self.backoff_ms = s.get_int("replica.fetch.backoff.ms")
        self.timeout_s = (self.wait_ms + s.get_int("replica.socket.timeout.ms")) / 1000
        # Leader epochs, unless a test plants a bug.
        self.mode = truncation_mode(services.planted_bug)
        self._channel = grpc_security.aio_channel(
            address,
            options=channel_options(
                max_receive_bytes=self.response_max_bytes + (1 << 20), max_send_bytes=16 << 20
            ),
        )
        self._stub = broker_pb2_grpc.BrokerStub(self._channel)
        self._stream = FetchStream(self._stub)
        self._task = asyncio.ensure_future(self._run())

    def add(self, tp: TopicPartition, fetch_offset: int, leader_epoch: int) -> None:
        self.states[tp] = FetchState(fetch_offset, leader_epoch)
        self._by_name.setdefault(tp.topic, {})[tp.partition] = tp
        self._moved.add(tp)
        self._wakeup.set()

    def remove(self, tp: TopicPartition) -> None:
        self.states.pop(tp, None)
        numbers = self._by_name.get(tp.topic)
        if numbers is not None and numbers.pop(tp.partition, None) is not None and not numbers:
            del self._by_name[tp.topic]

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._stream.close()
        await self._channel.close()

    def _delay(self, tp: TopicPartition, reason: str, error: ErrorCode | None = None) -> None:
        st = self.states.get(tp)
        if st is not None:
            st.delayed_until_ms = self.services.now_ms() + backoff_ms_for(error, self.backoff_ms)
            slog.event("follower_backoff", logging.DEBUG, tp=str(tp), reason=reason)

    def _fail(self, tp: TopicPartition, error: ErrorCode) -> None:
        # Dropped until the next LeaderAndIsr re-adds it (reference §3.8).
        self.states.pop(tp, None)
        slog.event("follower_partition_failed", logging.WARNING, tp=str(tp), error=error.name)

    # ---- the loop --------------------------------------------------------------------------

    async def _run(self) -> None:
        while True:
            try:
                worked = await self._one_round()
            except (grpc.aio.AioRpcError, FetchStreamError) as exc:
                error = exc.reason if isinstance(exc, FetchStreamError) else exc.code().name
                slog.event(
                    "follower_fetch_failed", logging.WARNING, leader=self.leader_id,
                    address=self.address, error=error,
                )  # fmt: skip
                for tp in list(self.states):
                    self._delay(tp, "request_failed")
                worked = False
            except Exception as exc:  # never let one bad response kill the fetcher
                slog.event("follower_fetcher_error", logging.ERROR, error=repr(exc))
                worked = False
            if not worked:
                await self._sleep_until_ready()

    async def _sleep_until_ready(self) -> None:
        now = self.services.now_ms()
        delays = [st.delayed_until_ms - now for st in self.states.values()]
        timeout = max(min(delays), 1) / 1000 if delays else None
        self._wakeup.clear()
        await wait_set(self._wakeup, timeout)

    def _ready(self) -> tuple[dict[TopicPartition, FetchState], dict[TopicPartition, FetchState]]:
        """The partitions not backing off: to truncate first, and to fetch (in one pass)."""
        now = self.services.now_ms()
        truncating: dict[TopicPartition, FetchState] = {}
        fetching: dict[TopicPartition, FetchState] = {}
        for tp, st in self.states.items():
            if st.delayed_until_ms <= now:
                (truncating if st.truncating else fetching)[tp] = st
        return truncating, fetching

    async def _one_round(self) -> bool:
        truncating, fetching = self._ready()
        if truncating:
            await self._truncate(truncating)
            fetching = self._ready()[1]  # the truncation moved some to fetching, or failed them
        if not fetching:
            return bool(truncating)
        await self._fetch(fetching)
        return True

    # ---- truncation (reference §4.4) ------------------------------------------------------

    async def _truncate(self, states: dict[TopicPartition, FetchState]) -> None:
        asks: dict[TopicPartition, int] = {}
        for tp, st in states.items():
            hosted = self.partitions.get(tp)
            if hosted is None:
                self.states.pop(tp, None)
                continue
            epoch = epoch_to_ask(self.mode, hosted.log.epoch_cache)
            if epoch is None:
                d = truncate_to_high_watermark(st.fetch_offset, hosted.log.log_end_offset)
                self._apply_truncation(tp, st, hosted, d.offset, done=True)
            else:
                asks[tp] = epoch
        if not asks:
            return
        request = broker_pb2.OffsetsForLeaderEpochRequest(replica_id=self.services.broker_id)
        for topic in sorted({tp.topic for tp in asks}):
            t = request.topics.add(topic=topic)
            for tp, epoch in asks.items():
                if tp.topic == topic:
                    t.partitions.add(
                        partition=tp.partition,
                        current_leader_epoch=states[tp].leader_epoch,
                        leader_epoch=epoch,
                    )
        response = await self._stub.OffsetsForLeaderEpoch(request, timeout=self.timeout_s)
        for t in response.topics:
            for r in t.partitions:
                tp = TopicPartition(t.topic, r.partition)
                self._on_epoch_answer(tp, states.get(tp), r)

    def _on_epoch_answer(
        self, tp: TopicPartition, asked: FetchState | None, r: broker_pb2.EpochEndOffset
    ) -> None:
        st = self.states.get(tp)
        hosted = self.partitions.get(tp)
        if st is None or st is not asked or hosted is None or not st.truncating:
            return  # the partition changed while we waited: drop the answer
        error = error_from_wire(r.error_code)
        if error is ErrorCode.FENCED_LEADER_EPOCH:
            self._fail(tp, error)
            return
        if error is not ErrorCode.NONE:
            self._delay(tp, error.name, error)
            return
        decision = decide_from_epoch_answer(
            leader_epoch=r.leader_epoch,
            leader_end_offset=r.end_offset,
            cache=hosted.log.epoch_cache,
            log_end_offset=hosted.log.log_end_offset,
            initial_fetch_offset=st.fetch_offset,
        )
        self._apply_truncation(tp, st, hosted, decision.offset, decision.done)

    def _apply_truncation(
        self, tp: TopicPartition, st: FetchState, hosted: HostedPartition, offset: int, done: bool
    ) -> None:
        log, p = hosted.log, hosted.partition
        before = log.log_end_offset
        if offset < before:
            log.truncate_to(offset)
            p.on_truncate(log.log_end_offset)
        slog.event(
            "follower_truncated" if offset < before else "follower_truncation_checked",
            logging.WARNING if offset < p.high_watermark else logging.INFO,
            tp=str(tp),
            leader=self.leader_id,
            from_offset=before,
            to_offset=log.log_end_offset,
            done=done,
        )
        if done:
            st.truncating = False
            st.fetch_offset = log.log_end_offset
            self._moved.add(tp)

    # ---- fetching (reference §3.8) --------------------------------------------------------

    async def _fetch(self, states: dict[TopicPartition, FetchState]) -> None:
        # Only a follower outside the ISR is ever throttled (Kafka's shouldFollowerThrottle):
        # in a quiet cluster none is, and the filter need not look at thousands of partitions.
        if not all(st.in_sync for st in states.values()):
            throttles = self.services.follower_throttles
            states = {tp: st for tp, st in states.items() if not throttles(tp, st.in_sync)}
        if not states:  # every partition throttled: wait for the quota's window to move on
            await asyncio.sleep(THROTTLED_WAIT_S)
            return

        def state_of(tp: TopicPartition) -> PartitionFetchState:
            st, hosted = states[tp], self.partitions.get(tp)
            log_start = hosted.log.log_start_offset if hosted is not None else -1
            return (st.fetch_offset, log_start, st.leader_epoch)

        # An incremental session (KIP-227): only partitions whose state changed are named.
        moved, self._moved = self._moved, set()
        plan = self.session.plan(states.keys(), state_of, moved)
        request = follower_fetch_request(
            plan,
            replica_id=self.services.broker_id,
            max_wait_ms=self.wait_ms,
            min_bytes=self.min_bytes,
            max_bytes=self.response_max_bytes,
            partition_max_bytes=self.partition_max_bytes,
        )
        try:
            response = await self._stream.fetch(request, self.timeout_s)
        except BaseException:
            self.session.on_failure()
            raise
        error = error_from_wire(response.error_code)
        if not self.session.on_response(error, response.session_id):
            slog.event("follower_fetch_session_reset", leader=self.leader_id, error=error.name)
            if error not in SESSION_ERRORS:  # the leader failed the whole request: back off
                for tp in list(self.states):
                    self._delay(tp, error.name)
            return
        for t in response.responses:
            numbers = self._by_name.get(t.topic, {})
            for r in t.partitions:
                answered = numbers.get(r.partition_index)
                asked = states.get(answered) if answered is not None else None
                if answered is not None and asked is not None:
                    await self._on_partition_data(answered, asked, asked.fetch_offset, r)

    async def _on_partition_data(
        self,
        tp: TopicPartition,
        asked: FetchState,
        asked_offset: int,
        r: broker_pb2.FetchPartitionData,
    ) -> None:
        st = self.states.get(tp)
        hosted = self.partitions.get(tp)
        if st is not asked or st is None or hosted is None or st.fetch_offset != asked_offset:
            return  # changed while the fetch was in flight
        if r.error_code == NO_ERROR:
            self._append(tp, st, hosted, r)
            return
        error = error_from_wire(r.error_code)
        if error is ErrorCode.OFFSET_OUT_OF_RANGE:
            await self._out_of_range(tp, st, hosted)
        elif error is ErrorCode.FENCED_LEADER_EPOCH:
            self._fail(tp, error)
        elif error in RETRY_LATER:
            self._delay(tp, error.name, error)
        else:
            self._fail(tp, error)

    def _append(
        self,
        tp: TopicPartition,
        st: FetchState,
        hosted: HostedPartition,
        r: broker_pb2.FetchPartitionData,
    ) -> None:
        log, p = hosted.log, hosted.partition
        try:
            before, _ = hosted.append_as_follower(r.records, r.high_watermark)
        except RecordError as exc:
            slog.event("follower_append_failed", logging.WARNING, tp=str(tp), error=str(exc))
            self._delay(tp, exc.code.name, exc.code)
            return
        self._take_leader_log_start(tp, hosted, r.log_start_offset)
        st.fetch_offset = log.log_end_offset
        st.in_sync = r.high_watermark - st.fetch_offset <= 0
        self.services.record_fetched(tp, len(r.records))
        self._moved.add(tp)
        if p.high_watermark != before:
            slog.event(
                "hw_advanced" if p.high_watermark > before else "hw_lowered",
                logging.DEBUG,
                tp=str(tp),
                high_watermark=p.high_watermark,
                cause="leader_hw",
            )

    def _take_leader_log_start(
        self, tp: TopicPartition, hosted: HostedPartition, leader_log_start: int
    ) -> None:
        """Kafka's processPartitionData: the follower's log start follows the leader's
        (retention or DeleteRecords there), never past its own HW."""
        log, hw = hosted.log, hosted.partition.high_watermark
        before = log.log_start_offset
        if leader_log_start > before and log.maybe_increment_log_start_offset(
            min(leader_log_start, hw), hw
        ):
            self._moved.add(tp)  # the leader learns it from the next fetch
            slog.event(
                "log_start_offset_moved", tp=str(tp), log_start_offset=log.log_start_offset,
                previous_log_start_offset=before, cause="leader",
            )  # fmt: skip

    async def _out_of_range(
        self, tp: TopicPartition, st: FetchState, hosted: HostedPartition
    ) -> None:
        """Reference §4.5: ask the leader for its LEO and log start, then decide."""
        latest = await self._list_offset(tp, st, -1)
        earliest = await self._list_offset(tp, st, -2)
        if latest is None or earliest is None or self.states.get(tp) is not st:
            self._delay(tp, "list_offsets_failed")
            return
        log = hosted.log
        d = decide_out_of_range(
            leader_log_end_offset=latest,
            leader_log_start_offset=earliest,
            log_end_offset=log.log_end_offset,
        )
        if d.restart_at is not None:
            log.truncate_fully_and_start_at(d.restart_at)
        elif d.truncate_to is not None:
            log.truncate_to(d.truncate_to)
        hosted.partition.on_truncate(log.log_end_offset)
        st.fetch_offset = d.fetch_offset
        self._moved.add(tp)
        slog.event(
            "follower_out_of_range", logging.WARNING, tp=str(tp), fetch_offset=d.fetch_offset
        )

    async def _list_offset(self, tp: TopicPartition, st: FetchState, timestamp: int) -> int | None:
        request = broker_pb2.ListOffsetsRequest(replica_id=self.services.broker_id)
        request.topics.add(name=tp.topic).partitions.add(
            partition_index=tp.partition,
            current_leader_epoch=st.leader_epoch,
            timestamp=timestamp,
        )
        response = await self._stub.ListOffsets(request, timeout=self.timeout_s)
        for t in response.topics:
            for r in t.partitions:
                if error_from_wire(r.error_code) is ErrorCode.NONE:
                    return int(r.offset)
        return None
