"""The broker's log cleaner thread (Kafka 2.6's LogCleaner.CleanerThread): every
`log.cleaner.backoff.ms` it picks the filthiest compacted log (`broker.log.cleaner.policy`),
cleans it in a process of its own (`broker.log.cleaner.clean`: off the event loop, and off the
broker's GIL), writes
`cleaner-offset-checkpoint` and then swaps the cleaned segments in on the loop; one log at a
time, one clean after another while some log is due.

The checkpoint holds, per log, where the next clean starts, and doubles as the log's gap
horizon: recovery takes offset gaps (compaction's) up to it and no further (recovery.py). It is
written before the swap, so a crash in between leaves gaps the next start accepts; a follower's
entry follows the gaps of the cleaned batches it took from its leader (Log.gap_horizon)."""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import logging
import multiprocessing
import os
import signal
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Protocol

from broker.log.checkpoints import write_offsets_checkpoint
from broker.log.cleaner.clean import (
    CleanAborted,
    CleanPlan,
    CleanResult,
    clean,
    clean_directory,
)
from broker.log.cleaner.offset_map import capacity_for
from broker.log.cleaner.policy import Cleanable, CompactionConfig, cleanable, delete_horizon_ms
from broker.log.log import Log
from broker.log.store import FileSegmentStore
from broker.partition_table import HostedPartition, PartitionTable
from broker.topic_configs import TopicConfigs
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
PR_SET_PDEATHSIG = 1  # linux/prctl.h
CLEANER_NICENESS = 10


class CleanerHost(Protocol):
    """What the cleaner uses of the broker's LogManager."""

    settings: Settings
    partitions: PartitionTable
    topic_configs: TopicConfigs
    log_dir: Path
    wall_clock_ms: Callable[[], int]
    on_log_start_moved: Callable[[TopicPartition], None]

    def unlink_later(self, tp: TopicPartition, log: Log, names: list[str]) -> None: ...


def compacted(policy: str) -> bool:
    return "compact" in {p.strip() for p in policy.split(",")}


class LogCleaner:
    def __init__(self, manager: CleanerHost, checkpoint: dict[TopicPartition, int]) -> None:
        self.manager = manager
        self.settings = manager.settings
        # Read at start-up by the LogManager (Log opens take their gap horizons from it).
        self.checkpoint = checkpoint
        self._written: dict[TopicPartition, int] | None = None
        self._task: asyncio.Task[None] | None = None
        self._process: ProcessPoolExecutor | None = None  # the cleaner's process, on first need
        self._stopping = False
        self.cleans = 0  # completed cleans (tests)

    def start(self) -> None:
        if self.settings.get_bool("log.cleaner.enable"):
            self._task = asyncio.ensure_future(self._run())

    async def stop(self) -> None:
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self._process is not None:
            await asyncio.to_thread(self._process.shutdown, wait=True, cancel_futures=True)
        await self.write_checkpoint()

    def _spawn(self) -> ProcessPoolExecutor:
        if self._process is None:
            # spawn: the broker's threads (gRPC, ZooKeeper) must not be forked.
            self._process = ProcessPoolExecutor(
                1, mp_context=multiprocessing.get_context("spawn"), initializer=init_cleaner_process
            )
        return self._process

    def _gone(self, tp: TopicPartition, hosted: HostedPartition) -> bool:
        return self._stopping or self.manager.partitions.get(tp) is not hosted

    async def _run_clean(self, log: Log, plan: CleanPlan, gone: Callable[[], bool]) -> CleanResult:
        """The clean in the cleaner's own process (its per-record Python work would hold the
        broker's GIL: bench logs measured a 6 ms acks=all p99 become 220 ms with a thread);
        in a thread for a log not on files (tests)."""
        store = log.store
        if not isinstance(store, FileSegmentStore):
            return await asyncio.to_thread(clean, store, plan, gone)
        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            self._spawn(), clean_directory, str(store.directory), plan
        )
        if gone():
            await asyncio.to_thread(log.unlink_retired, _swap_files(result))
            raise CleanAborted("the log left this broker while it was cleaned")
        return result

    async def _run(self) -> None:
        while True:
            try:
                cleaned = await self.clean_once()
                await self.write_checkpoint()
            except Exception as exc:  # the thread must survive one bad clean
                slog.event("task_failed", logging.ERROR, task="log_cleaner", error=repr(exc))
                cleaned = False
            if not cleaned:
                await asyncio.sleep(self.settings.get_int("log.cleaner.backoff.ms") / 1000)

    def _config(self, topic: str) -> CompactionConfig:
        configs = self.manager.topic_configs
        return CompactionConfig(
            min_cleanable_ratio=float(configs.value(topic, "min.cleanable.dirty.ratio")),
            min_compaction_lag_ms=configs.int_value(topic, "min.compaction.lag.ms"),
            max_compaction_lag_ms=configs.int_value(topic, "max.compaction.lag.ms"),
            delete_retention_ms=configs.int_value(topic, "delete.retention.ms"),
        )

    def filthiest(self) -> tuple[TopicPartition, HostedPartition, Cleanable] | None:
        """The due log with the highest dirty ratio (grabFilthiestCompactedLog)."""
        now = self.manager.wall_clock_ms()
        best = None
        policy: dict[str, bool] = {}  # per topic, once a pass: 10,000 partitions share a few
        for tp, hosted in list(self.manager.partitions.items()):
            is_compacted = policy.get(tp.topic)
            if is_compacted is None:
                value = self.manager.topic_configs.value(tp.topic, "cleanup.policy")
                is_compacted = policy[tp.topic] = compacted(value)
            if not is_compacted:
                continue
            log = hosted.log
            found = cleanable(
                log.segment_infos(), self._config(tp.topic), checkpoint=self.checkpoint.get(tp),
                log_start_offset=log.log_start_offset, log_end_offset=log.log_end_offset,
                # Kafka's firstUncleanableDirtyOffset: never an open transaction's records.
                high_watermark=log.last_stable_offset(hosted.partition.high_watermark),
                now_ms=now,
            )  # fmt: skip
            if found.due(self._config(tp.topic)) and (best is None or found.ratio > best[2].ratio):
                best = (tp, hosted, found)
        return best

    async def clean_once(self) -> bool:
        """Clean the filthiest due log, if any; whether one was cleaned."""
        picked = self.filthiest()
        if picked is None:
            return False
        tp, hosted, found = picked
        log, configs = hosted.log, self.manager.topic_configs
        infos = log.segment_infos()
        plan = CleanPlan(
            segments=tuple(infos), first_dirty=found.first_dirty,
            first_uncleanable=found.first_uncleanable,
            delete_horizon_ms=delete_horizon_ms(
                infos, found.first_dirty, configs.int_value(tp.topic, "delete.retention.ms")
            ),
            segment_bytes=configs.int_value(tp.topic, "segment.bytes"),
            index_interval_bytes=log.index_interval_bytes,
            map_capacity=capacity_for(
                self.settings.get_int("log.cleaner.dedupe.buffer.size"),
                self.settings.get_float("log.cleaner.io.buffer.load.factor"),
            ),
            aborted=tuple(log.all_aborted()),
        )  # fmt: skip
        try:
            result = await self._run_clean(log, plan, lambda: self._gone(tp, hosted))
        except (CleanAborted, BrokenProcessPool) as exc:
            slog.event("log_cleaning_aborted", logging.WARNING, tp=str(tp), reason=str(exc))
            return False
        # The horizon first, durably: a crash after the swap must find its gaps accepted.
        self.checkpoint[tp] = result.end_offset
        log.gap_horizon = max(log.gap_horizon, result.end_offset)
        await self.write_checkpoint()
        slog.event(
            "log_clean_written", tp=str(tp), segments=[g.segment.base_offset for g in result.groups]
        )
        delay_ms = self.settings.get_int("minibroker.test.cleaner.swap.delay.ms")
        if delay_ms > 0:  # TEST ONLY: a window to kill the broker between write and swap
            await asyncio.sleep(delay_ms / 1000)
        self._swap(tp, hosted, result)
        self.cleans += 1
        return True

    def _swap(self, tp: TopicPartition, hosted: HostedPartition, result: CleanResult) -> None:
        log = hosted.log
        before = log.size_bytes
        pending = list(result.groups)
        swapped = 0
        while pending and self.manager.partitions.get(tp) is hosted:
            group = pending.pop(0)
            retired = log.swap_in(group.replaced, group.segment, group.aborted)
            if retired is None:
                pending.insert(0, group)
                break
            self.manager.unlink_later(tp, log, retired)
            swapped += 1
        leftovers = _swap_files(CleanResult(result.end_offset, pending))
        if leftovers:
            asyncio.ensure_future(asyncio.to_thread(log.unlink_retired, leftovers))
        slog.event(
            "log_cleaned" if not pending else "log_cleaning_aborted",
            tp=str(tp), cleaned_up_to=result.end_offset, segments=swapped,
            bytes_before=before, bytes_after=log.size_bytes, keys=result.keys,
            records_read=result.records_read, records_kept=result.records_kept,
            markers_removed=result.markers_removed,
            bytes_read=result.bytes_read, bytes_written=result.bytes_written,
            seconds=round(result.seconds, 3),
        )  # fmt: skip
        if swapped:
            self.manager.on_log_start_moved(tp)  # readers of the swapped segments re-check

    async def write_checkpoint(self) -> None:
        """Every log's entry (its gap horizon, if that is further on), when it changed."""
        entries = dict(self.checkpoint)
        for tp, hosted in list(self.manager.partitions.items()):
            horizon = max(entries.get(tp, 0), hosted.log.gap_horizon)
            if horizon > 0:
                entries[tp] = horizon
        if entries == self._written:
            return
        path = self.manager.log_dir / CLEANER_OFFSET_CHECKPOINT
        await asyncio.to_thread(write_offsets_checkpoint, path, entries)
        self._written = entries

    def forget(self, tp: TopicPartition) -> None:
        self.checkpoint.pop(tp, None)


def init_cleaner_process() -> None:
    """In the cleaner's process: SIGKILL it when the broker dies (Linux's PR_SET_PDEATHSIG), so
    a killed broker leaves no cleaner behind; and yield the CPU to the brokers' event loops
    (nice 10: cleaning is background work, as Kafka's cleaner throttle makes it)."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the broker died before the line above
        os._exit(1)
    os.nice(CLEANER_NICENESS)


def _swap_files(result: CleanResult) -> list[str]:
    """The swap files of a clean's groups (removed when they are not swapped in)."""
    return [name for g in result.groups for name in g.swap_names]
