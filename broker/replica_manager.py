"""The broker's replica manager (Kafka's ReplicaManager): the partitions this broker hosts, and
the produce, fetch and control paths over them.

Everything runs on the broker's one asyncio loop: the pure rules (broker.replication) decide,
this shell appends and reads the logs (page-cache I/O, bounded by the request's sizes) and hands
ZooKeeper writes and fsyncs to threads. The periodic ISR and checkpoint tasks live in
broker.isr_tasks; the follower side lives in broker.fetch.fetcher.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from broker.delayed import AcksAllWaiters, DelayedFetch, Linger
from broker.delete_records import RecordDeletion
from broker.fetch import reads as fetch_reads
from broker.fetch import session_cache as fetch_session_cache
from broker.fetch.fetcher_manager import FetcherManager
from broker.isr_tasks import IsrTasks
from broker.leader_appends import LeaderAppends
from broker.log.layout import partition_dir
from broker.log.log_types import wall_clock_ms
from broker.log_manager import LogManager
from broker.metadata_cache import LiveBroker, MetadataCache, PartitionMetadata
from broker.metrics import BrokerMetrics
from broker.partition_opener import PartitionOpener, load_checkpointed_high_watermarks
from broker.partition_table import FetcherServices, IsrTaskServices, PartitionTable
from broker.purgatory import Purgatory
from broker.replication.partition import Partition
from broker.replication_quotas import ReplicationQuotas
from broker.role_changes import make_follower, make_leader
from broker.topic_configs import TopicConfigs
from broker.types import (
    ControlHeader,
    FetchParams,
    FetchPartitionRequest,
    FetchPartitionResult,
    LeaderAndIsrPartition,
    ProduceResult,
    StopReplicaPartition,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import monotonic_ms
from minibroker.runtime.gc_tuning import HeapFreezer
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore

# StopReplica epochs that always pass the check (reference §3.4).
NO_EPOCH, EPOCH_DURING_DELETE = -1, -2


class ReplicaManager:
    def __init__(
        self,
        settings: Settings,
        broker_id: int,
        log_dir: Path,
        store: ZkStore,
        metrics: BrokerMetrics,
    ) -> None:
        self.settings = settings
        self.inter_broker_listener = settings.get_str("inter.broker.listener.name")
        self.broker_id = broker_id
        self.log_dir = log_dir
        self.store = store
        self.metrics = metrics
        self.partitions: PartitionTable = {}
        self.metadata = MetadataCache()
        self.controller_epoch = 0
        self.broker_epoch = -1
        self.produce_purgatory: Purgatory[dict[TopicPartition, ProduceResult]] = Purgatory()
        self.fetch_purgatory: Purgatory[dict[TopicPartition, FetchPartitionResult]] = Purgatory()
        self._acks_all = AcksAllWaiters()
        linger_ms = settings.get_int("minibroker.replica.fetch.linger.ms")
        self._linger = Linger(linger_ms, self._acks_all.urgent) if linger_ms else None
        self.appends = LeaderAppends(
            self.partitions, self.produce_purgatory, self._acks_all, metrics,
            self.on_partition_changed, self.now_ms,
        )  # fmt: skip
        self.fetch_sessions = fetch_session_cache.FetchSessionCache(
            settings.get_int("max.incremental.fetch.session.cache.slots")
        )
        # TEST ONLY: a known-wrong rule for the checkers to catch (minibroker.core.planted_bugs).
        self.planted_bug = settings.planted_bug
        if self.planted_bug.enabled:
            slog.event(
                "planted_bug_enabled",
                logging.WARNING,
                bug=self.planted_bug.value,
                note="TEST ONLY: this broker runs a known-wrong replication rule on purpose",
            )
        self.first_leader_and_isr = asyncio.Event()
        # Kafka's onLeadershipChange: told (tp, leader?) after each role change and stop.
        self.leadership_listeners: list[Callable[[TopicPartition, bool], None]] = []
        # HWs read at start-up, kept for partitions not hosted (yet) so a checkpoint rewrite
        # does not forget them (Kafka keeps every log of the dir in its checkpoint).
        self.checkpointed_hw = load_checkpointed_high_watermarks(log_dir)
        self.hw_moved: set[TopicPartition] = set()
        self.heap = HeapFreezer()  # full collections skip what many partitions left behind
        self.topic_configs = TopicConfigs(settings, broker_id)
        self.deletion = RecordDeletion(
            self.partitions, self.topic_configs, self.metadata.is_alive, self.on_partition_changed
        )
        self.logs = LogManager(
            self.partitions, self.topic_configs, settings, log_dir,
            wall_clock_ms=wall_clock_ms, on_log_start_moved=self.on_partition_changed,
        )  # fmt: skip
        self.quotas = ReplicationQuotas(settings, self.topic_configs, self.now_ms)
        services = FetcherServices(
            broker_id, settings, self.planted_bug, self.now_ms,
            self.quotas.follower_throttles, self.quotas.record_follower,
        )  # fmt: skip
        self.fetchers = FetcherManager(self.partitions, services)
        metrics.fetch_sessions.set_function(lambda: len(self.fetch_sessions))
        metrics.fetch_session_partitions.set_function(self.fetch_sessions.partitions_cached)
        metrics.follower_full_fetches.set_function(self.fetchers.full_fetches)
        self.opener = PartitionOpener(
            settings=settings,
            broker_id=broker_id,
            log_dir=log_dir,
            store=store,
            partitions=self.partitions,
            checkpointed_hw=self.checkpointed_hw,
            hw_moved=self.hw_moved,
            checkpointed_start=self.logs.checkpointed_start,
            checkpointed_clean=self.logs.cleaner.checkpoint,
            planted_bug=self.planted_bug,
            now_ms=self.now_ms,
            topic_configs=self.topic_configs,
        )
        self.isr = IsrTasks(
            self.partitions,
            IsrTaskServices(
                settings=settings,
                metrics=metrics,
                store=store,
                log_dir=log_dir,
                now_ms=self.now_ms,
                first_leader_and_isr=self.first_leader_and_isr,
                checkpointed_hw=self.checkpointed_hw,
                hw_moved=self.hw_moved,
                on_partition_changed=self.on_partition_changed,
            ),
        )

    @staticmethod
    def now_ms() -> int:
        # Lag and timeouts are durations: a clock that never jumps back is the right one.
        return monotonic_ms()

    def partition(self, tp: TopicPartition) -> Partition | None:
        return hosted.partition if (hosted := self.partitions.get(tp)) else None

    def on_partition_changed(self, tp: TopicPartition) -> None:
        """LEO, HW or leadership of `tp` changed: re-test the operations waiting on it."""
        self.fetch_sessions.mark_changed(tp)
        self.produce_purgatory.check(tp)
        self.fetch_purgatory.check(tp)
        self.deletion.purgatory.check(tp)

    # ---- produce (reference §2.10, §3.6) --------------------------------------------------

    async def append_records(
        self,
        acks: int,
        timeout_ms: int,
        batches: dict[TopicPartition, bytes],
        *,
        internal: bool = False,
        transactional_id: str | None = None,
    ) -> dict[TopicPartition, ProduceResult]:
        """A client's or a coordinator's batches on the partitions led here (leader_appends.py)."""
        return await self.appends.append_records(
            acks, timeout_ms, batches, internal=internal, transactional_id=transactional_id
        )

    # ---- fetch (reference §2.11, §3.7) ----------------------------------------------------

    async def fetch_messages(
        self, params: FetchParams, session: fetch_session_cache.FetchSession | None = None
    ) -> dict[TopicPartition, FetchPartitionResult]:
        """Read `params.partitions`; if that is not min_bytes, wait for them and, with a
        follower's `session` (whose idle partitions this fetch did not need to read), for any
        partition of the session to change."""
        fetch_time = self.now_ms()
        leader_leos: dict[TopicPartition, int] = {}
        if params.is_follower:
            replica = params.replica_id
            params = dataclasses.replace(
                params,
                leader_throttle=lambda tp, p: self.quotas.leader_throttles(tp, p, replica),
            )
        results = await self._read_and_wait(params, session, fetch_time, leader_leos)
        if params.is_follower:
            self.quotas.record_leader({tp: len(r.records) for tp, r in results.items()})
        return results

    async def _read_and_wait(
        self,
        params: FetchParams,
        session: fetch_session_cache.FetchSession | None,
        fetch_time: int,
        leader_leos: dict[TopicPartition, int],
    ) -> dict[TopicPartition, FetchPartitionResult]:
        results = fetch_reads.read_all(self.partitions, params, leader_leos)
        hw_moved = []
        if params.is_follower:
            # Read first, then update: the response carries the HW from before (pitfall 4).
            for req in params.partitions:
                if results[req.tp].error is ErrorCode.NONE:
                    leo = leader_leos[req.tp]
                    if self._update_follower(params.replica_id, req, fetch_time, leo):
                        hw_moved.append(req.tp)
        available = {tp: len(r.records) for tp, r in results.items() if r.records}
        failed = len(leader_leos) < len(results)  # a partition answered with an error
        if params.max_wait_ms <= 0 or failed or sum(available.values()) >= params.min_bytes:
            return results
        read = {r.tp: r for r in params.partitions}
        request_of = fetch_session_cache.request_lookup(read, session)
        op = DelayedFetch(
            params.max_wait_ms,
            params.min_bytes,
            lambda tp, n: fetch_reads.readable_bytes(
                self.partitions,
                request_of(tp),
                params.is_follower,
                n,
                params.leader_throttle,
                read_committed=params.read_committed,
            ),  # fmt: skip
            lambda changed: fetch_reads.reread(
                self.partitions, params, results, [request_of(tp) for tp in changed]
            ),
            available,
            changed=hw_moved,  # the answer carries the HW as of its completion
            linger=self._linger if params.is_follower else None,
        )
        with fetch_session_cache.waiting_in(session, op):  # it watches what this did not read
            return await self.fetch_purgatory.wait(op, read)

    def _update_follower(
        self, follower: int, req: FetchPartitionRequest, fetch_time: int, leader_leo: int
    ) -> bool:
        """Reference §2.3 for one partition of a follower's fetch; whether the HW moved."""
        hosted = self.partitions[req.tp]
        remote = hosted.partition.remote.get(follower)
        start_before = remote.log_start_offset if remote is not None else None
        out = hosted.partition.update_follower_fetch_state(
            follower,
            fetch_offset=req.fetch_offset,
            log_start_offset=req.log_start_offset,
            fetch_time_ms=fetch_time,
            leader_end_offset=leader_leo,
            local_leo=hosted.log.log_end_offset,
        )
        if out.propose_isr is not None:
            self.isr.write_isr_soon(out.propose_isr)
        if out.hw_changed:
            hw = hosted.partition.high_watermark
            slog.event("hw_advanced", tp=str(req.tp), high_watermark=hw, cause="follower_fetch")
        if out.hw_changed or (remote is not None and remote.log_start_offset != start_before):
            self.on_partition_changed(req.tp)  # a DeleteRecords may wait on its start offset
        return out.hw_changed

    # ---- control (reference §3.3, §3.4) ---------------------------------------------------

    def check_control_header(self, header: ControlHeader) -> ErrorCode:
        if header.broker_epoch not in (None, -1) and header.broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if header.controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = header.controller_epoch
        return ErrorCode.NONE

    async def become_leader_or_follower(
        self, header: ControlHeader, partitions: list[LeaderAndIsrPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        top = self.check_control_header(header)
        if top is not ErrorCode.NONE:
            return top, {p.tp: top for p in partitions}
        await self.opener.load_topic_configs({p.tp.topic for p in partitions})
        errors: dict[TopicPartition, ErrorCode] = {}
        accepted: list[LeaderAndIsrPartition] = []
        hosted_before = len(self.partitions)
        for item in partitions:
            if self.broker_id not in item.state.replicas:
                errors[item.tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                continue
            hosted = await self.opener.get_or_create(item.tp)
            hosted.partition.min_insync_replicas = self.topic_configs.min_insync_replicas(
                item.tp.topic
            )
            if item.state.leader_epoch > hosted.partition.leader_epoch:
                accepted.append(item)
                errors[item.tp] = ErrorCode.NONE
            else:
                # Stale or equal leader epoch: ignored (reference §3.3, pitfall 16).
                errors[item.tp] = ErrorCode.STALE_CONTROLLER_EPOCH
        for item in accepted:
            hosted = self.partitions[item.tp]
            leader = item.state.leader == self.broker_id
            if leader:
                make_leader(hosted, item, self.fetchers, self.now_ms())
                self.on_partition_changed(item.tp)
            else:
                make_follower(hosted, item, self.fetchers, self.metadata, self.on_partition_changed)
            for listener in self.leadership_listeners:
                listener(item.tp, leader)
        self.first_leader_and_isr.set()
        if self.heap.opened(len(self.partitions) - hosted_before):
            slog.event(
                "heap_frozen", partitions=len(self.partitions), objects=gc.get_freeze_count()
            )
        return ErrorCode.NONE, errors

    def update_metadata(
        self,
        header: ControlHeader,
        live_brokers: list[LiveBroker],
        partition_states: list[tuple[TopicPartition, PartitionMetadata]],
    ) -> ErrorCode:
        """Reference §3.4: replace the cache unless the controller epoch is stale."""
        error = self.check_control_header(header)
        if error is not ErrorCode.NONE:
            return error
        deleted = self.metadata.update(header.controller_id, live_brokers, partition_states)
        slog.event(
            "metadata_updated",
            controller_id=header.controller_id,
            controller_epoch=header.controller_epoch,
            live_brokers=sorted(b.broker_id for b in live_brokers),
            partitions=len(partition_states),
            deleted=[str(tp) for tp in deleted],
        )
        return ErrorCode.NONE

    async def stop_replicas(
        self, header: ControlHeader, partitions: list[StopReplicaPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        top = self.check_control_header(header)
        if top is not ErrorCode.NONE:
            return top, {p.tp: top for p in partitions}
        errors: dict[TopicPartition, ErrorCode] = {}
        for item in partitions:
            hosted = self.partitions.get(item.tp)
            current = hosted.partition.leader_epoch if hosted else NO_EPOCH
            if item.leader_epoch not in (NO_EPOCH, EPOCH_DURING_DELETE) and (
                item.leader_epoch <= current
            ):
                errors[item.tp] = ErrorCode.FENCED_LEADER_EPOCH
                continue
            self.fetchers.remove_partitions([item.tp])
            if (stopped := self.partitions.pop(item.tp, None)) is not None:
                stopped.log.close()  # its file descriptors go back to the pool
            self.on_partition_changed(item.tp)
            for listener in self.leadership_listeners:
                listener(item.tp, False)
            if item.delete:
                await asyncio.to_thread(
                    shutil.rmtree, partition_dir(self.log_dir, item.tp), ignore_errors=True
                )
                self.checkpointed_hw.pop(item.tp, None)
                self.logs.forget(item.tp)
            errors[item.tp] = ErrorCode.NONE
            slog.event("replica_stopped", tp=str(item.tp), deleted=item.delete)
        self.heap.removed(sum(1 for e in errors.values() if e is ErrorCode.NONE))
        return ErrorCode.NONE, errors
