"""The async consumer: assigned partitions (no groups, no commits), one long-poll Fetch per
leader kept in flight across polls, ListOffsets for resets. Leader moves refresh metadata and
retry; other errors raise from `poll` when it has no records to return.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.client.errors import (
    BrokerError,
    ClientClosed,
    ClientError,
    OffsetOutOfRange,
)
from minibroker.client.fetch_state import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ConsumerRecord,
    ErrorAction,
    OffsetReset,
    SubscriptionState,
    fetch_error_action,
    reset_timestamp,
)
from minibroker.client.metadata import BrokerNode, connect
from minibroker.client.offsets import list_offsets
from minibroker.client.requests import fetch_request
from minibroker.core.errors import ErrorCode
from minibroker.core.records import RecordError
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import monotonic_ms
from minibroker.runtime.wire import error_from_wire

# What a finished Fetch task hands to poll: the broker, the offsets it was asked for, and the
# response or the gRPC failure.
FetchOutcome = tuple[BrokerNode, dict[TopicPartition, int], Any]


class Consumer:
    """`async with Consumer("host:port") as c: c.assign([tp]); records = await c.poll(1000)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        max_wait_ms: int = 500,
        min_bytes: int = 1,
        max_bytes: int = 50 * 1024 * 1024,
        max_partition_bytes: int = 1024 * 1024,
        auto_offset_reset: OffsetReset = "earliest",
        request_timeout_ms: int = 30000,
        retry_backoff_ms: int = 100,
        default_api_timeout_ms: int = 60000,
        metadata_max_age_ms: int = 300000,
        channels: ChannelPool | None = None,
        isolation_level: str = "read_uncommitted",
    ) -> None:
        if auto_offset_reset not in ("earliest", "latest", "none"):
            raise ValueError(
                f"auto_offset_reset must be earliest, latest or none, not {auto_offset_reset!r}"
            )
        self._owns_channels, self._channels, self._metadata = connect(
            bootstrap,
            channels,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        if isolation_level not in ("read_uncommitted", "read_committed"):
            raise ValueError(
                f"isolation_level must be read_uncommitted or read_committed, "
                f"not {isolation_level!r}"
            )
        # read_committed: fetches stop at the LSO and leave aborted transactions out; "latest"
        # is the LSO (Kafka's isolation.level).
        self._isolation = 1 if isolation_level == "read_committed" else 0
        self._subs = SubscriptionState(auto_offset_reset)
        self._max_wait_ms = max_wait_ms
        self._min_bytes = min_bytes
        self._max_bytes = max_bytes
        self._max_partition_bytes = max_partition_bytes
        self._request_timeout_ms = request_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._api_timeout_ms = default_api_timeout_ms
        self._fetches: dict[BrokerNode, asyncio.Task[FetchOutcome]] = {}
        self._fetching: set[TopicPartition] = set()
        self._reset_task: asyncio.Task[dict[TopicPartition, int]] | None = None
        self._resetting: dict[TopicPartition, OffsetReset] = {}
        self._closed = False

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ---- assignment and positions --------------------------------------------------------------

    def assign(self, tps: Iterable[TopicPartition]) -> None:
        """Consume exactly these partitions (replacing any earlier assignment)."""
        self._check_open()
        tps = list(tps)
        self._subs.assign(tps)
        self._metadata.add_topics(tp.topic for tp in tps)

    def assignment(self) -> list[TopicPartition]:
        return self._subs.assigned()

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """Fetch `tp` from `offset` on; answers to fetches already sent are dropped."""
        self._subs.seek(tp, offset)

    def seek_to_beginning(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Move to the log start offset, looked up lazily (on the next poll or position)."""
        for tp in self._subs.assigned() if tps is None else tps:
            self._subs.request_reset(tp, "earliest")

    def seek_to_end(self, tps: Iterable[TopicPartition] | None = None) -> None:
        """Move to the high watermark, looked up lazily (on the next poll or position)."""
        for tp in self._subs.assigned() if tps is None else tps:
            self._subs.request_reset(tp, "latest")

    async def position(self, tp: TopicPartition) -> int:
        """The offset of the next record to be returned for `tp`, resolving a pending reset."""
        strategy = self._subs.needs_reset().get(tp)
        if strategy is not None:
            if strategy == "none":
                raise OffsetOutOfRange(ErrorCode.OFFSET_OUT_OF_RANGE, f"no position for {tp}")
            offsets = await self._list_offsets({tp: reset_timestamp(strategy)})
            self._subs.seek(tp, offsets[tp])
        position = self._subs.position(tp)
        assert position is not None
        return position

    def highwater(self, tp: TopicPartition) -> int | None:
        """The high watermark of `tp` as of the last fetch answer, if any."""
        hw = self._subs.state(tp).high_watermark
        return None if hw < 0 else hw

    async def partitions_for(self, topic: str, timeout_ms: int | None = None) -> list[int]:
        """The topic's partitions; raises UnknownTopicError or NoBrokerAvailable."""
        self._check_open()
        parts = self._metadata.cache.partitions_for(topic)
        if parts:
            return parts
        return await self._metadata.wait_for_topic(topic, timeout_ms or self._api_timeout_ms)

    async def end_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's high watermark (ListOffsets latest, as a consumer sees it)."""
        return await self._list_offsets({tp: LATEST_TIMESTAMP for tp in tps})

    async def beginning_offsets(self, tps: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """Each partition's log start offset (ListOffsets earliest)."""
        return await self._list_offsets({tp: EARLIEST_TIMESTAMP for tp in tps})

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        tasks: list[asyncio.Task[Any]] = list(self._fetches.values())
        if self._reset_task is not None:
            tasks.append(self._reset_task)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._metadata.close()
        if self._owns_channels:
            await self._channels.close()

    async def _list_offsets(
        self, timestamps: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int]:
        self._check_open()
        return await list_offsets(
            self._metadata,
            self._channels,
            timestamps,
            timeout_ms=self._api_timeout_ms,
            request_timeout_ms=self._request_timeout_ms,
            retry_backoff_ms=self._retry_backoff_ms,
            isolation_level=self._isolation,
        )

    def _position_or_raise(self, tp: TopicPartition) -> int:
        position = self._subs.position(tp)
        assert position is not None, f"{tp} is fetchable without a position"
        return position

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("the consumer is closed")

    # ---- poll ----------------------------------------------------------------------------------

    async def poll(self, timeout_ms: int = 1000) -> list[ConsumerRecord]:
        """Records fetched for the assigned partitions, waiting up to `timeout_ms` for some.
        Raises BrokerError (OffsetOutOfRange, ...) only when no records came back."""
        self._check_open()
        deadline = monotonic_ms() + timeout_ms
        while True:
            now = monotonic_ms()
            self._metadata.maybe_refresh(now)
            self._start_resets()
            self._start_fetches(now)
            records = self._take_completed()
            remaining = deadline - monotonic_ms()
            if records or remaining <= 0:
                return records
            await self._wait(remaining, now)

    async def _wait(self, remaining_ms: int, now: int) -> None:
        tasks: list[asyncio.Task[Any]] = list(self._fetches.values())
        if self._reset_task is not None:
            tasks.append(self._reset_task)
        wait_ms = remaining_ms
        backoff_end = self._subs.next_backoff_end(now)
        if backoff_end is not None or not tasks:
            # Something waits for a backoff or a leader: look again after it, not at the deadline.
            wait_ms = min(wait_ms, self._retry_backoff_ms)
        if tasks:
            await asyncio.wait(tasks, timeout=wait_ms / 1000, return_when=asyncio.FIRST_COMPLETED)
        else:
            await asyncio.sleep(wait_ms / 1000)

    def _start_resets(self) -> None:
        if self._reset_task is not None:
            return
        needs = self._subs.needs_reset()
        if not needs:
            return
        if "none" in needs.values():
            tp = next(tp for tp, s in needs.items() if s == "none")
            raise OffsetOutOfRange(
                ErrorCode.OFFSET_OUT_OF_RANGE, f"no position for {tp} and auto_offset_reset=none"
            )
        self._resetting = needs
        self._reset_task = asyncio.create_task(
            self._list_offsets({tp: reset_timestamp(s) for tp, s in needs.items()})
        )

    def _start_fetches(self, now: int) -> None:
        by_leader: dict[BrokerNode, list[TopicPartition]] = {}
        for tp in self._subs.fetchable(now):
            if tp in self._fetching:
                continue
            leader = self._metadata.cache.leader_for(tp)
            if leader is None:
                self._metadata.request_update()
                self._subs.back_off(tp, now + self._retry_backoff_ms)
            elif leader not in self._fetches:
                by_leader.setdefault(leader, []).append(tp)
        for node, tps in by_leader.items():
            offsets = {tp: self._position_or_raise(tp) for tp in tps}
            self._fetching.update(tps)
            self._fetches[node] = asyncio.create_task(self._fetch(node, offsets))

    async def _fetch(self, node: BrokerNode, offsets: dict[TopicPartition, int]) -> FetchOutcome:
        request = fetch_request(
            offsets,
            self._metadata.cache.leader_epoch,
            max_wait_ms=self._max_wait_ms,
            min_bytes=self._min_bytes,
            max_bytes=self._max_bytes,
            partition_max_bytes=self._max_partition_bytes,
            isolation_level=self._isolation,
        )
        deadline_ms = self._request_timeout_ms + self._max_wait_ms
        try:
            resp = await self._channels.call(node.address, "Fetch", request, deadline_ms)
        except RpcFailure as exc:
            return node, offsets, exc
        return node, offsets, resp

    def _take_completed(self) -> list[ConsumerRecord]:
        """Records of every finished fetch; if none, raise the first error they carried."""
        records: list[ConsumerRecord] = []
        errors: list[ClientError] = []
        if self._reset_task is not None and self._reset_task.done():
            reset, self._reset_task = self._reset_task, None
            try:
                offsets = reset.result()
            except ClientError as exc:
                errors.append(exc)
            else:
                # Only where the same reset is still wanted: a seek may have come in between.
                needs = self._subs.needs_reset()
                for tp, offset in offsets.items():
                    if needs.get(tp) == self._resetting.get(tp):
                        self._subs.seek(tp, offset)
        for node, task in list(self._fetches.items()):
            if task.done():
                del self._fetches[node]
                records += self._handle_fetch(*task.result(), errors)
        if not records and errors:
            raise errors[0]
        return records

    def _handle_fetch(
        self,
        node: BrokerNode,
        offsets: dict[TopicPartition, int],
        resp: Any,
        errors: list[ClientError],
    ) -> list[ConsumerRecord]:
        self._fetching.difference_update(offsets)
        now = monotonic_ms()
        if isinstance(resp, RpcFailure):
            self._metadata.mark_failed(node.address)
            for tp in offsets:
                self._subs.back_off(tp, now + self._retry_backoff_ms)
            if not resp.retriable:
                errors.append(resp)
            return []
        top_error = error_from_wire(resp.error_code)
        records: list[ConsumerRecord] = []
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                if tp not in offsets or not self._subs.is_assigned(tp):
                    continue  # not asked for, or unassigned since
                code = (
                    top_error if top_error is not ErrorCode.NONE else error_from_wire(p.error_code)
                )
                if code is ErrorCode.NONE:
                    try:
                        aborted = None
                        if self._isolation:
                            aborted = [(a.producer_id, a.first_offset)
                                       for a in p.aborted_transactions]  # fmt: skip
                        records += self._subs.apply_fetched(
                            tp, offsets[tp], p.records, p.high_watermark, p.log_start_offset,
                            aborted,
                        )  # fmt: skip
                    except RecordError as exc:
                        errors.append(BrokerError(exc.code, f"{tp} at offset {offsets[tp]}: {exc}"))
                else:
                    self._handle_partition_error(tp, offsets[tp], code, now, errors)
        return records

    def _handle_partition_error(
        self, tp: TopicPartition, offset: int, code: ErrorCode, now: int, errors: list[ClientError]
    ) -> None:
        action = fetch_error_action(code, self._subs.auto_offset_reset)
        if action is ErrorAction.REFRESH_METADATA:
            self._metadata.request_update(tp)
            self._subs.back_off(tp, now + self._retry_backoff_ms)
        elif action is ErrorAction.BACKOFF:
            self._subs.back_off(tp, now + self._retry_backoff_ms)
        elif action is ErrorAction.RESET_OFFSET:
            if self._subs.position(tp) == offset:
                self._subs.request_reset(tp, self._subs.auto_offset_reset)
        elif code is ErrorCode.OFFSET_OUT_OF_RANGE:
            errors.append(OffsetOutOfRange(code, f"{tp} has no offset {offset}"))
        else:
            errors.append(BrokerError(code, f"fetching {tp} at offset {offset}"))
