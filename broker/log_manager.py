"""The broker's periodic log work (Kafka 2.6's LogManager): retention every
`log.retention.check.interval.ms` over every hosted log, leaders' and followers' alike (each
bounded by its own HW); the deleted segments' files removed `file.delete.delay.ms` later in a
worker thread; and `log-start-offset-checkpoint` written every
`log.flush.start.offset.checkpoint.interval.ms` and at a clean stop.

The rule is `broker.log.retention` (pure); this shell reads each topic's effective configs,
applies the decisions to the logs on the loop (renames only) and leaves file removal and
checkpoint writes to threads. Every deletion is one `segments_deleted` event."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

from broker.log.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    load_offsets_checkpoint,
    write_offsets_checkpoint,
)
from broker.log.log import Log
from broker.log.retention import RetentionPolicy, decide
from broker.log_cleaner import CLEANER_OFFSET_CHECKPOINT, LogCleaner
from broker.partition_table import HostedPartition, PartitionTable
from broker.topic_configs import TopicConfigs
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings

# Kafka's LogManager.InitialTaskDelayMs: the first retention check waits for start-up.
INITIAL_TASK_DELAY_MS = 30_000


def load_checkpoint(log_dir: Path, name: str, action: str) -> dict[TopicPartition, int]:
    """A checkpoint file of the log dir; an unreadable one is discarded with an event saying
    what the broker does instead (`action`), and rewritten by the next checkpoint."""
    path = log_dir / name
    entries, unreadable = load_offsets_checkpoint(path)
    if unreadable is not None:
        slog.event(
            "checkpoint_discarded", logging.WARNING, file=str(path), error=unreadable, action=action
        )
    return entries


def retention_policy(configs: TopicConfigs, topic: str) -> RetentionPolicy:
    """The topic's effective retention.ms, retention.bytes and cleanup.policy."""
    policies = {p.strip() for p in configs.value(topic, "cleanup.policy").split(",")}
    return RetentionPolicy(
        retention_ms=configs.int_value(topic, "retention.ms"),
        retention_bytes=configs.int_value(topic, "retention.bytes"),
        delete="delete" in policies,
    )


class LogManager:
    def __init__(
        self,
        partitions: PartitionTable,
        topic_configs: TopicConfigs,
        settings: Settings,
        log_dir: Path,
        *,
        wall_clock_ms: Callable[[], int],
        on_log_start_moved: Callable[[TopicPartition], None],
    ) -> None:
        self.partitions = partitions
        self.topic_configs = topic_configs
        self.settings = settings
        self.log_dir = log_dir
        self.wall_clock_ms = wall_clock_ms
        self.on_log_start_moved = on_log_start_moved
        # Start offsets read at start-up, kept for logs not hosted (yet) so that a rewrite of
        # the file does not forget them (as the HW checkpoint's).
        self.checkpointed_start = load_checkpoint(
            log_dir,
            LOG_START_OFFSET_CHECKPOINT,
            "each log starts at its first segment's base offset",
        )
        self.cleaner = LogCleaner(
            self,
            load_checkpoint(
                log_dir,
                CLEANER_OFFSET_CHECKPOINT,
                "compacted logs are cleaned again from their start, and take no offset gaps "
                "until then",
            ),
        )
        self._last_checkpoint: dict[TopicPartition, int] | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        # Retired files waiting for file.delete.delay.ms: their timers and what they remove.
        self._pending_unlinks: dict[asyncio.TimerHandle, tuple[Log, list[str]]] = {}

    def start(self) -> None:
        self.cleaner.start()
        s = self.settings
        interval = s.get_int("log.retention.check.interval.ms")
        self._every(min(INITIAL_TASK_DELAY_MS, interval), interval, self._retention_pass)
        self._every(
            s.get_int("log.flush.start.offset.checkpoint.interval.ms"),
            s.get_int("log.flush.start.offset.checkpoint.interval.ms"),
            self.checkpoint_log_start_offsets,
        )

    async def stop(self) -> None:
        await self.cleaner.stop()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        pending = list(self._pending_unlinks.items())
        self._pending_unlinks.clear()
        for timer, (log, names) in pending:
            timer.cancel()
            await asyncio.to_thread(log.unlink_retired, names)
        await self.checkpoint_log_start_offsets(force=True)

    def _every(self, delay_ms: int, period_ms: int, fn: Callable[[], Awaitable[None]]) -> None:
        async def loop() -> None:
            await asyncio.sleep(delay_ms / 1000)
            while True:
                try:
                    await fn()
                except Exception as exc:  # a periodic task must survive one bad run
                    slog.event("task_failed", logging.ERROR, task=fn.__name__, error=repr(exc))
                await asyncio.sleep(period_ms / 1000)

        task = asyncio.ensure_future(loop())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- retention ---------------------------------------------------------------------

    async def _retention_pass(self) -> None:
        self.run_retention()

    def run_retention(self) -> int:
        """One check of every hosted log (Kafka's cleanupLogs); the segments deleted."""
        now = self.wall_clock_ms()
        deleted = 0
        policies: dict[str, RetentionPolicy] = {}  # per topic, once a pass
        for tp, hosted in list(self.partitions.items()):
            try:
                policy = policies.get(tp.topic)
                if policy is None:
                    policy = policies[tp.topic] = retention_policy(self.topic_configs, tp.topic)
                deleted += self._retain(tp, hosted, policy, now)
            except Exception as exc:  # one log's failure must not stop the others'
                slog.event("retention_failed", logging.ERROR, tp=str(tp), error=repr(exc))
        return deleted

    def _retain(
        self, tp: TopicPartition, hosted: HostedPartition, policy: RetentionPolicy, now_ms: int
    ) -> int:
        log, p = hosted.log, hosted.partition
        decision = decide(
            log.retention_views(),
            policy,
            now_ms=now_ms,
            log_start_offset=log.log_start_offset,
            high_watermark=p.high_watermark,
            log_end_offset=log.log_end_offset,
        )
        if decision.nothing:
            return 0
        before = log.log_start_offset
        size_before = log.size_bytes
        if decision.roll_first:
            log.roll()
        retired = log.retire_oldest(len(decision.deleted))
        log.maybe_increment_log_start_offset(log.segment_base_offsets()[0], p.high_watermark)
        slog.event(
            "segments_deleted",
            tp=str(tp),
            role="leader" if p.is_leader else "follower",
            reasons=list(decision.reasons),
            segments=list(decision.deleted),
            bytes=size_before - log.size_bytes,
            rolled=decision.roll_first,
            log_start_offset=log.log_start_offset,
            previous_log_start_offset=before,
        )
        self.unlink_later(tp, log, retired)
        if log.log_start_offset != before:
            self.on_log_start_moved(tp)
        return len(decision.deleted)

    def unlink_later(self, tp: TopicPartition, log: Log, names: list[str]) -> None:
        """Remove retired files file.delete.delay.ms from now, in a worker thread."""
        delay_ms = self.topic_configs.int_value(tp.topic, "file.delete.delay.ms")
        loop = asyncio.get_running_loop()

        def due() -> None:
            self._pending_unlinks.pop(timer, None)
            task = asyncio.ensure_future(asyncio.to_thread(log.unlink_retired, names))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        timer = loop.call_later(max(delay_ms, 0) / 1000, due)
        self._pending_unlinks[timer] = (log, names)

    # ---- log-start-offset-checkpoint ---------------------------------------------------

    async def checkpoint_log_start_offsets(self, *, force: bool = False) -> None:
        """Write the start offset of every log whose start is past its first segment's base
        (and those only checkpointed); skipped when nothing changed, unless `force`."""
        entries = dict(self.checkpointed_start)
        for tp, hosted in list(self.partitions.items()):
            log = hosted.log
            if log.log_start_offset > log.segment_base_offsets()[0]:
                entries[tp] = log.log_start_offset
            else:
                entries.pop(tp, None)
        if entries == self._last_checkpoint and not force:
            return
        path = self.log_dir / LOG_START_OFFSET_CHECKPOINT
        await asyncio.to_thread(write_offsets_checkpoint, path, entries)
        self._last_checkpoint = entries

    def forget(self, tp: TopicPartition) -> None:
        """The partition's log was deleted from this broker."""
        self.checkpointed_start.pop(tp, None)
        self.cleaner.forget(tp)
