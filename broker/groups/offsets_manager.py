"""Kafka's GroupMetadataManager for one broker: the partitions of `__consumer_offsets` it leads,
each loaded from its log when the broker becomes their leader (COORDINATOR_LOAD_IN_PROGRESS
meanwhile) and forgotten when it stops leading them (NOT_COORDINATOR); committed offsets and
group metadata written to them as acks=all appends (offsets.commit.required.acks,
offsets.commit.timeout.ms), the cache changed only once the append is acknowledged, so that
what a coordinator answers is exactly what a new leader of the partition will load.

The rules (which records win, what expires, how append errors answer) are pure:
offsets_log.py and offsets_topic.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping

from broker.groups.offsets_log import CommittedOffset, GroupLog
from broker.groups.offsets_topic import OFFSETS_TOPIC, OffsetsTopicSpec, commit_error
from broker.log.scan import batches_to_end
from broker.replica_manager import ReplicaManager
from minibroker.core.control_records import marker_of
from minibroker.core.coordinator_log.group_records import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    group_key,
    group_value,
    offset_key,
    offset_value,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.records import (
    CONTROL_FLAG,
    TRANSACTIONAL_FLAG,
    NewRecord,
    RecordError,
    build_batch,
    decode_batch,
)
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings

OnPartition = Callable[[int], None]
LOAD_RETRY_S = 1.0


class OffsetsManager:
    def __init__(
        self,
        rm: ReplicaManager,
        on_loaded: OnPartition,
        on_unloaded: OnPartition,
    ) -> None:
        self.rm = rm
        self.spec = offsets_topic_spec(rm.settings)
        self._on_loaded = on_loaded
        self._on_unloaded = on_unloaded
        self.loaded: dict[int, GroupLog] = {}
        self._loading: dict[int, asyncio.Task[None]] = {}
        # Offsets being committed, by group (Kafka's pendingOffsetCommits): never expired.
        self.pending: dict[str, Counter[TopicPartition]] = {}

    # ---- which partitions are here -------------------------------------------------------

    def partition_of(self, group_id: str) -> int:
        return self.spec.partition_of(group_id)

    def state(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates the group now, COORDINATOR_LOAD_IN_PROGRESS while
        it loads the group's partition, else NOT_COORDINATOR."""
        p = self.partition_of(group_id)
        if p in self.loaded:
            return ErrorCode.NONE
        if p in self._loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def loading(self) -> bool:
        return bool(self._loading)

    def group_log(self, group_id: str) -> GroupLog | None:
        return self.loaded.get(self.partition_of(group_id))

    def on_leadership(self, tp: TopicPartition, leader: bool) -> None:
        """Kafka's onElection / onResignation, for partitions of __consumer_offsets."""
        if tp.topic != OFFSETS_TOPIC:
            return
        self._unload(tp.partition)
        if leader:
            task = asyncio.ensure_future(self._load(tp.partition))
            self._loading[tp.partition] = task

    def _unload(self, partition: int) -> None:
        task = self._loading.pop(partition, None)
        if task is not None:
            task.cancel()
        if self.loaded.pop(partition, None) is not None or task is not None:
            self._on_unloaded(partition)
            slog.event("group_partition_unloaded", tp=f"{OFFSETS_TOPIC}-{partition}")

    async def stop(self) -> None:
        tasks = list(self._loading.values())
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # ---- loading ---------------------------------------------------------------------------

    async def _load(self, partition: int) -> None:
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        started = time.monotonic()
        while True:
            log = GroupLog()
            try:
                await self._replay(tp, log)
                break
            except Exception as exc:  # still loading (COORDINATOR_LOAD_IN_PROGRESS): again
                slog.event(
                    "task_failed", logging.ERROR, task="group_load", tp=str(tp), error=repr(exc)
                )
                await asyncio.sleep(LOAD_RETRY_S)
        self._loading.pop(partition, None)
        self.loaded[partition] = log
        for offset, why in log.skipped:
            slog.event("group_record_skipped", logging.WARNING, tp=str(tp), offset=offset, why=why)
        slog.event(
            "group_partition_loaded", tp=str(tp), groups=len(log.group_ids()),
            offsets=sum(len(o) for o in log.offsets.values()),
            ms=round((time.monotonic() - started) * 1000, 1),
        )  # fmt: skip
        self._on_loaded(partition)

    async def _replay(self, tp: TopicPartition, log: GroupLog) -> None:
        """Every record from the log start to the log end, a buffer at a time, yielding the
        loop between buffers (GroupMetadataManager.doLoadGroupsAndOffsets)."""
        buffer = self.rm.settings.get_int("offsets.load.buffer.size")
        hosted = self.rm.partitions.get(tp)
        if hosted is None:
            return
        # A transaction's marker may land while this loads (appended here as leader): the
        # scan reads to the log end as it is then (Kafka's logEndOffset def).
        async for data, header, offset in batches_to_end(hosted.log, buffer):
            if header.attributes & CONTROL_FLAG:
                marker = marker_of(data, header)
                if marker is not None and header.base_offset >= offset:
                    log.apply_marker(header.producer_id, marker.commit)
                continue
            try:
                records = decode_batch(data, header)
            except RecordError as exc:
                log.skipped.append((header.base_offset, str(exc)))
                continue
            txn = header.producer_id if header.attributes & TRANSACTIONAL_FLAG else -1
            for r in records:
                if r.offset >= offset:
                    log.apply(r.key, r.value, r.offset, txn)

    # ---- writing ---------------------------------------------------------------------------

    async def _append(
        self, partition: int, records: list[tuple[bytes, bytes | None]]
    ) -> tuple[ErrorCode, int]:
        """Append to the partition (acks=all by default); (error, base offset)."""
        tp = TopicPartition(OFFSETS_TOPIC, partition)
        batch = build_batch([NewRecord(k, v) for k, v in records], base_timestamp=self.rm.now_ms())
        settings = self.rm.settings
        results = await self.rm.append_records(
            settings.get_int("offsets.commit.required.acks"),
            settings.get_int("offsets.commit.timeout.ms"),
            {tp: batch},
            internal=True,
        )
        result = results[tp]
        return result.error, result.base_offset

    async def store_offsets(
        self, group_id: str, offsets: Mapping[TopicPartition, OffsetValue]
    ) -> ErrorCode:
        """Commit `offsets` for the group: the commit's error, for every partition of it."""
        p = self.partition_of(group_id)
        if p not in self.loaded:
            return self.state(group_id)
        items = sorted(offsets.items())
        pending = self.pending.setdefault(group_id, Counter())
        pending.update(tp for tp, _ in items)  # never expired while in flight
        try:
            error, base = await self._append_offsets(p, group_id, items)
        finally:
            pending.subtract(tp for tp, _ in items)
            if not +pending:
                self.pending.pop(group_id, None)
        if error is not ErrorCode.NONE:
            return commit_error(error)
        log = self.loaded.get(p)
        if log is not None:  # still leader: the acknowledged commit is what a reload sees
            mine = log.offsets.setdefault(group_id, {})
            for i, (tp, v) in enumerate(items):
                old = mine.get(tp)
                if old is None or old.record_offset < base + i:
                    mine[tp] = CommittedOffset(v, base + i)
        return ErrorCode.NONE

    async def _append_offsets(
        self, p: int, group_id: str, items: list[tuple[TopicPartition, OffsetValue]]
    ) -> tuple[ErrorCode, int]:
        return await self._append(
            p,
            [
                (offset_key(OffsetKey(group_id, tp.topic, tp.partition)), offset_value(v))
                for tp, v in items
            ],
        )

    async def store_txn_offsets(
        self,
        group_id: str,
        transactional_id: str,
        producer: tuple[int, int],
        offsets: Mapping[TopicPartition, OffsetValue],
    ) -> ErrorCode:
        """TxnOffsetCommit: the offsets as one transactional batch of the producer (id, epoch)
        at sequence 0, as Kafka's storeOffsets writes it; they wait, unseen by OffsetFetch,
        until the producer's marker reaches the partition (on_markers). As in Kafka, they are
        pending from before the append (GroupMetadata.prepareTxnOffsetCommit), so that a marker
        written while the append waits for the ISR (the producer fenced and its transaction
        aborted meanwhile) finds and drops them, rather than leaving them pending for good."""
        p = self.partition_of(group_id)
        log = self.loaded.get(p)
        if log is None:
            return self.state(group_id)
        items = sorted(offsets.items())
        prepared = log.prepare_txn_offsets(producer[0], group_id, items)
        tp = TopicPartition(OFFSETS_TOPIC, p)
        records = [
            NewRecord(offset_key(OffsetKey(group_id, t.topic, t.partition)), offset_value(v))
            for t, v in items
        ]
        batch = build_batch(
            records, base_timestamp=self.rm.now_ms(), producer_id=producer[0],
            producer_epoch=producer[1], base_sequence=0, attributes=TRANSACTIONAL_FLAG,
        )  # fmt: skip
        settings = self.rm.settings
        results = await self.rm.append_records(
            -1, settings.get_int("offsets.commit.timeout.ms"), {tp: batch},
            internal=True, transactional_id=transactional_id,
        )  # fmt: skip
        error, base = results[tp].error, results[tp].base_offset
        log.txn_offsets_appended(producer[0], prepared, base if error is ErrorCode.NONE else None)
        return commit_error(error) if error is not ErrorCode.NONE else ErrorCode.NONE

    def on_markers(self, producer_id: int, commit: bool, partitions: list[TopicPartition]) -> None:
        """A transaction marker was written to partitions led here (handleTxnCompletion)."""
        for tp in partitions:
            log = self.loaded.get(tp.partition) if tp.topic == OFFSETS_TOPIC else None
            if log is not None:
                log.apply_marker(producer_id, commit)

    def has_pending_txn(self, group_id: str, tp: TopicPartition) -> bool:
        """Whether a transaction's offset for `tp` awaits its marker (UNSTABLE_OFFSET_COMMIT
        for an OffsetFetch that requires stable offsets, KIP-447)."""
        log = self.group_log(group_id)
        return log is not None and any(
            (group_id, tp) in waiting for waiting in log.pending_txn.values()
        )

    async def store_group(self, group_id: str, value: GroupValue) -> ErrorCode:
        """The group's metadata record (GroupMetadataManager.storeGroup); the append's error."""
        p = self.partition_of(group_id)
        if p not in self.loaded:
            return self.state(group_id)
        error, _ = await self._append(p, [(group_key(GroupKey(group_id)), group_value(value))])
        log = self.loaded.get(p)
        if error is ErrorCode.NONE and log is not None:
            log.groups[group_id] = value
        return error

    async def remove(
        self, group_id: str, tps: Iterable[TopicPartition], *, whole_group: bool
    ) -> ErrorCode:
        """Tombstones: the group's offsets of `tps` and, with `whole_group`, its metadata."""
        p = self.partition_of(group_id)
        log = self.loaded.get(p)
        if log is None:
            return self.state(group_id)
        gone = sorted(tps)
        records: list[tuple[bytes, bytes | None]] = [
            (offset_key(OffsetKey(group_id, tp.topic, tp.partition)), None) for tp in gone
        ]
        if whole_group:
            records.append((group_key(GroupKey(group_id)), None))
        if not records:
            return ErrorCode.NONE
        error, _ = await self._append(p, records)
        if error is ErrorCode.NONE and (log := self.loaded.get(p)) is not None:
            for tp in gone:
                log.offsets.get(group_id, {}).pop(tp, None)
            if whole_group:
                log.groups.pop(group_id, None)
                log.offsets.pop(group_id, None)
        return commit_error(error)

    def committed(
        self, group_id: str, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, OffsetValue]:
        """The group's committed offsets (of `tps`, or all); those without one are left out."""
        log = self.group_log(group_id)
        mine = {} if log is None else log.offsets.get(group_id, {})
        wanted = mine.keys() if tps is None else tps
        return {tp: mine[tp].value for tp in wanted if tp in mine}


def offsets_topic_spec(settings: Settings) -> OffsetsTopicSpec:
    return OffsetsTopicSpec(
        settings.get_int("offsets.topic.num.partitions"),
        settings.get_int("offsets.topic.replication.factor"),
        settings.get_int("offsets.topic.segment.bytes"),
    )
