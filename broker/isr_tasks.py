"""The replica manager's periodic work and its ZooKeeper writes (reference §2.7, §3.1, §3.2):
isr-expiration every replica.lag.time.max.ms/2, conditional ISR writes, isr-change propagation
every 2.5 s, the HW checkpoint once the first LeaderAndIsr arrived, and the gauges."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from operator import attrgetter
from typing import Any

from broker.log.checkpoints import REPLICATION_OFFSET_CHECKPOINT, write_offsets_checkpoint
from broker.partition_table import IsrTaskServices, PartitionTable
from broker.replication.isr_propagation import IsrChangePropagation
from broker.replication.partition import Partition, ProposeIsr
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_store import ZkConnectionError, ZkError

ISR_WRITE_RETRY_S = 0.2
_PARTITION = attrgetter("partition")
_HW = attrgetter("high_watermark")


class IsrTasks:
    def __init__(self, partitions: PartitionTable, services: IsrTaskServices) -> None:
        self.partitions = partitions
        self.services = services
        s = services.settings
        self.propagation = IsrChangePropagation(
            start_ms=services.now_ms(),
            blackout_ms=s.get_int("minibroker.isr.change.propagation.blackout.ms"),
            max_delay_ms=s.get_int("minibroker.isr.change.propagation.max.delay.ms"),
        )
        self._tasks: set[asyncio.Task[None]] = set()
        # ISR proposals waiting for the batch being written (see write_isr_soon).
        self._isr_queue: list[ProposeIsr] = []
        self._isr_writing = False
        # What the HW checkpoint file last got written with (None: not written yet).
        # The last checkpoint written: the partitions, and how many HWs were only checkpointed.
        self._last_checkpoint: tuple[list[TopicPartition], int] | None = None

    def start(self) -> None:
        s = self.services.settings
        lag = s.get_int("replica.lag.time.max.ms")
        self._every(max(lag // 2, 1), self._isr_expiration)
        self._every(
            s.get_int("minibroker.isr.change.propagation.interval.ms"), self._propagate_changes
        )
        self._serve_gauges()
        self._spawn(self._hw_checkpoints())

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.services.first_leader_and_isr.is_set():
            await self.checkpoint_high_watermarks(force=True)

    def _spawn(self, coro: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _every(self, period_ms: int, fn: Callable[[], Awaitable[None] | None]) -> None:
        async def loop() -> None:
            while True:
                await asyncio.sleep(period_ms / 1000)
                try:
                    result = fn()
                    if result is not None:
                        await result
                except Exception as exc:  # a periodic task must survive one bad run
                    slog.event("task_failed", logging.ERROR, task=fn.__name__, error=repr(exc))

        self._spawn(loop())

    # ---- ISR shrink and the conditional write --------------------------------------------

    def _isr_expiration(self) -> None:
        now = self.services.now_ms()
        for hosted in list(self.partitions.values()):
            p = hosted.partition
            if p.leader_id != p.local_broker_id:
                continue  # maybe_shrink_isr's own first test, without the call: most are followers
            proposal = p.maybe_shrink_isr(hosted.log.log_end_offset, now)
            if proposal is not None:
                self.write_isr_soon(proposal)

    def write_isr_soon(self, proposal: ProposeIsr) -> None:
        """Queue the proposal's conditional write. What is proposed while a batch is being
        written goes out together in the next batch, pipelined, each write still conditional
        on its own zkVersion: a restarted follower that catches up on thousands of partitions
        at once rejoins their ISRs in a few round trips' time, not one round trip each."""
        self._isr_queue.append(proposal)
        if not self._isr_writing:
            self._isr_writing = True
            self._spawn(self._write_isr_queue())

    async def _write_isr_queue(self) -> None:
        try:
            while self._isr_queue:
                batch, self._isr_queue = self._isr_queue, []
                versions = await self._conditional_writes(batch)
                for proposal, version in zip(batch, versions, strict=True):
                    try:
                        self._write_isr(proposal, version)
                    except Exception as exc:  # one partition must not hold up the others
                        slog.event("task_failed", logging.ERROR, task="isr_write", error=repr(exc))
        finally:
            self._isr_writing = False

    def _still_ours(self, proposal: ProposeIsr) -> bool:
        hosted = self.partitions.get(proposal.tp)
        return hosted is not None and hosted.partition.isr_change_in_flight is proposal

    async def _conditional_writes(self, batch: list[ProposeIsr]) -> list[int | None]:
        """The ISR writes, resent while ZooKeeper cannot answer (Kafka's ZooKeeper client
        retries until connected): a write lost with its connection may have been applied,
        and giving up would leave ZooKeeper's ISR (what the controller elects from) and ours
        apart. Each write stays conditional, and a resend finding its own write counts as
        success. Per proposal its new zkVersion, or None (conflict, or given up)."""
        svc = self.services
        give_up_ms = svc.now_ms() + 2 * svc.settings.get_int("zookeeper.session.timeout.ms")
        out: list[int | None] = [None] * len(batch)
        todo = list(range(len(batch)))
        while todo:
            writes = [(batch[i].tp, batch[i].new_state, batch[i].expected_zk_version) for i in todo]
            try:
                versions = await asyncio.to_thread(svc.store.update_partition_states, writes)
            except ZkError as exc:
                retry = [i for i in todo if self._still_ours(batch[i])]
                if not isinstance(exc, ZkConnectionError) or svc.now_ms() >= give_up_ms:
                    retry = []
                for i in sorted(set(todo) - set(retry)):
                    slog.event(
                        "isr_write_error", logging.WARNING, tp=str(batch[i].tp), error=str(exc)
                    )
                if not retry:
                    return out
                slog.event(
                    "isr_write_retry",
                    tp=str(batch[retry[0]].tp),
                    partitions=len(retry),
                    error=str(exc),
                )
                todo = retry
                await asyncio.sleep(ISR_WRITE_RETRY_S)
                continue
            for i, version in zip(todo, versions, strict=True):
                out[i] = version
            return out
        return out

    def _write_isr(self, proposal: ProposeIsr, new_version: int | None) -> None:
        """Apply one written (or failed) proposal to its partition and log it."""
        svc = self.services
        hosted = self.partitions.get(proposal.tp)
        if hosted is None:
            return
        # The ISR the proposal changed, in assignment order as the new ISR is written; from the
        # proposal, not from the partition: a write that fails after this broker stopped
        # leading (a fenced leader learning the new epoch) must still say what it tried.
        new_isr = set(proposal.new_state.isr)
        old = (
            new_isr | proposal.changed if proposal.kind == "shrink" else new_isr - proposal.changed
        )
        old_isr = [b for b in hosted.partition.assignment if b in old]
        old_isr += sorted(old - set(old_isr))
        now = svc.now_ms()
        # When each replica that leaves or joins last caught up (the shrink rule's input), on
        # the wall clock: the rules' clock is monotonic.
        wall_offset = now_ms() - now
        caught_up = {
            str(b): r.last_caught_up_time_ms + wall_offset
            for b, r in hosted.partition.remote.items()
            if b in proposal.changed and r.last_caught_up_time_ms > 0
        }
        hw_moved = hosted.partition.apply_isr_write(
            proposal, new_version, hosted.log.log_end_offset, now
        )
        fields: dict[str, Any] = {
            "tp": str(proposal.tp),
            "old_isr": old_isr,
            "isr": list(proposal.new_state.isr),
            "changed": sorted(proposal.changed),
            "last_caught_up_ms": caught_up,
            "leader_epoch": proposal.new_state.leader_epoch,
            "expected_zk_version": proposal.expected_zk_version,
        }
        if new_version is None:
            svc.metrics.failed_isr_updates.inc()
            slog.event(f"isr_{proposal.kind}_failed", logging.WARNING, **fields)
            return
        (svc.metrics.isr_shrinks if proposal.kind == "shrink" else svc.metrics.isr_expands).inc()
        self.propagation.record(proposal.tp, now)
        slog.event(f"isr_{proposal.kind}", zk_version=new_version, **fields)
        if hw_moved:
            slog.event(
                "hw_advanced",
                tp=str(proposal.tp),
                high_watermark=hosted.partition.high_watermark,
                cause=f"isr_{proposal.kind}",
            )
        svc.on_partition_changed(proposal.tp)

    async def _propagate_changes(self) -> None:
        changed = self.propagation.maybe_propagate(self.services.now_ms())
        if not changed:
            return
        try:
            path = await asyncio.to_thread(
                self.services.store.create_isr_change_notification, changed
            )
        except ZkError as exc:
            # Put them back: they go out with the next check.
            for tp in changed:
                self.propagation.pending.add(tp)
            slog.event("isr_change_notification_failed", logging.WARNING, error=str(exc))
            return
        slog.event(
            "isr_change_notification_created", path=path, partitions=[str(tp) for tp in changed]
        )

    # ---- HW checkpoint (reference §3.5) --------------------------------------------------

    async def _hw_checkpoints(self) -> None:
        await self.services.first_leader_and_isr.wait()
        period = self.services.settings.get_int("replica.high.watermark.checkpoint.interval.ms")
        while True:
            await asyncio.sleep(period / 1000)
            try:
                await self.checkpoint_high_watermarks()
            except OSError as exc:
                slog.event("hw_checkpoint_failed", logging.ERROR, error=str(exc))

    async def checkpoint_high_watermarks(self, *, force: bool = False) -> None:
        """Write every hosted partition's HW (and those only checkpointed) to the file.

        A write that would give the file the bytes it already holds is skipped unless
        `force`: Kafka rewrites it every interval regardless, but an idle broker with
        thousands of partitions would spend an fsync and a formatted file per second on
        nothing. The partitions mark their HW moves to tell (hw_moved)."""
        # Every Partition adds itself to hw_moved when its HW moves: an idle broker's check
        # is a look at the table's keys (a C loop), not a read of 10,000 HWs a second (~0.5%
        # of a core). checkpointed_hw only ever shrinks (a deleted partition's entry goes).
        tps = list(self.partitions)
        svc = self.services
        moved = bool(svc.hw_moved)
        svc.hw_moved.clear()
        last = self._last_checkpoint
        if not force and not moved and last == (tps, len(svc.checkpointed_hw)):
            return
        entries = dict(svc.checkpointed_hw)
        entries.update(zip(tps, map(_HW, map(_PARTITION, self.partitions.values())), strict=True))
        path = svc.log_dir / REPLICATION_OFFSET_CHECKPOINT
        self._last_checkpoint = (tps, len(svc.checkpointed_hw))
        try:
            await asyncio.to_thread(write_offsets_checkpoint, path, entries)
        except BaseException:
            self._last_checkpoint = None  # the next run writes again
            raise

    # ---- gauges --------------------------------------------------------------------------

    def _serve_gauges(self) -> None:
        """The partition gauges, computed when /metrics is scraped (as Kafka's gauges are
        read), not every second over thousands of partitions."""
        m = self.services.metrics

        def led() -> list[Partition]:
            # On the scrape's thread: copy the table first (one step under the GIL), the loop
            # may add or drop partitions meanwhile.
            hosted = list(self.partitions.values())
            return [h.partition for h in hosted if h.partition.is_leader]

        m.partition_count.set_function(lambda: len(self.partitions))
        m.leader_count.set_function(lambda: len(led()))
        m.under_replicated.set_function(lambda: sum(1 for p in led() if p.under_replicated()))
        m.under_min_isr.set_function(
            lambda: sum(1 for p in led() if len(p.isr) < p.min_insync_replicas)
        )
        m.at_min_isr.set_function(
            lambda: sum(1 for p in led() if len(p.isr) == p.min_insync_replicas)
        )
