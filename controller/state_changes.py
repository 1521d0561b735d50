"""How the controller changes partition state (reference §1.5, §5.5, §5.6): decide with
controller.logic from the state it holds (or reads), write it conditionally and fenced by
/controller_epoch's zkVersion, read afresh and retry on BADVERSION, and queue the LeaderAndIsr +
UpdateMetadata that announce it.
The event handlers in controller.operations build on these."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from controller.broker_channels import ChannelManager
from controller.logic import elections
from controller.logic.batch import RequestBatch
from controller.logic.context import ControllerContext
from controller.metrics import ControllerMetrics
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore

MAX_WRITE_ATTEMPTS = 10


def _unset(*_args: Any) -> None:
    raise RuntimeError("the controller's event loop sets post and post_threadsafe")


# Decide the new state from the freshly read one; None = no change possible.
Decide = Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | None]


class StateChanges:
    def __init__(
        self,
        store: ZkStore,
        settings: Settings,
        controller_id: int,
        channels: ChannelManager,
        metrics: ControllerMetrics,
    ) -> None:
        self.store = store
        self.settings = settings
        self.controller_id = controller_id
        self.channels = channels
        self.metrics = metrics
        self.ctx = ControllerContext()
        # The listener the controller reaches brokers on (Kafka: the inter-broker listener).
        self.listener = settings.get_str("inter.broker.listener.name")
        self._background: set[asyncio.Future[None]] = set()
        # Queue an event on the controller's loop (set by the event loop): `post` from the
        # loop, `post_threadsafe` from kazoo's threads.
        # Topics whose znode has a data watch (PartitionModifications); kept across failovers,
        # as the watches are (kazoo's threads read it to end a deleted topic's watch).
        self._watched_topics: set[str] = set()
        self.post: Callable[..., None] = _unset
        self.post_threadsafe: Callable[..., None] = _unset

    def _update_gauges(self) -> None:
        self.metrics.offline_partitions.set(len(self.ctx.offline_partitions()))
        self.metrics.global_partitions.set(len(self.ctx.assignments))
        self.metrics.global_topics.set(len(self.ctx.topics()))

    async def resume_deletions(self) -> None:
        """Another round of topic deletion (controller.topic_deletion provides it)."""
        raise NotImplementedError

    # ---- writing partition state ---------------------------------------------------------

    async def _write_states(
        self, tps: Iterable[TopicPartition], decide: Decide
    ) -> list[TopicPartition]:
        """For each partition: read the state znode, decide, write it conditionally and fenced;
        on BADVERSION read again and retry (reference §5.5). Returns the partitions changed,
        in the order given.

        Each round reads and writes all partitions still to do in one pipelined batch (Kafka's
        updateLeaderAndIsr also sends all of a batch's writes at once): a broker's 333
        leaderships move in a few round trips' time, not a thousand.

        The first round decides from the states this controller last read or wrote, with their
        zkVersions, and reads only those it has none of: a write conditional on the version
        succeeds only if the znode is still what was decided from, and a BADVERSION (a leader
        changed the ISR since) sends that partition to the next round, which reads; so does a
        cached state from which nothing needs to change. Half the ZooKeeper operations when
        nothing changed underneath, as after a broker's death. (Kafka's controller reads the
        states first every time, reference §5.5; the conditional write makes the cache safe.)"""
        order = {tp: i for i, tp in enumerate(tps)}
        pending = list(order)
        changed: list[TopicPartition] = []
        for attempt in range(MAX_WRITE_ATTEMPTS):
            if not pending:
                break
            cached = {}
            if attempt == 0:
                cached = {tp: self.ctx.states[tp] for tp in pending if tp in self.ctx.states}
            fresh = dict(cached)
            unknown = [tp for tp in pending if tp not in cached]
            if unknown:
                fresh.update(await asyncio.to_thread(self.store.read_partition_states, unknown))
            writes = []
            pending = []
            for tp, state in fresh.items():
                if state.controller_epoch > self.ctx.epoch:
                    slog.event(
                        "state_change_failed",
                        logging.WARNING,
                        tp=str(tp),
                        reason="newer controller epoch in the state znode",
                    )
                    continue
                new = decide(tp, state)
                if new is not None:
                    writes.append((tp, new, state.zk_version))
                elif tp in cached:
                    pending.append(tp)  # "nothing to do" only holds for what ZooKeeper has
                else:
                    self.ctx.states[tp] = state
            versions = await asyncio.to_thread(
                self.store.set_partition_states_fenced, self.ctx.epoch_zk_version, writes
            )
            for tp, new, _expected in writes:
                version = versions[tp]
                if version is None:
                    pending.append(tp)  # BADVERSION: read again and decide again
                else:
                    self.ctx.states[tp] = replace(new, zk_version=version)
                    changed.append(tp)
        return sorted(changed, key=order.__getitem__)

    async def elect_preferred(self, tps: list[TopicPartition], cause: str) -> list[TopicPartition]:
        ctx = self.ctx

        def decide(tp: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            return elections.preferred_election(ctx.assignments[tp], fresh, ctx.online(), ctx.epoch)

        batch = RequestBatch()
        changed = await self._write_states(tps, decide)
        for tp in changed:
            self._announce(tp, "preferred", cause=cause)
            self._send_state(batch, tp)
        self.channels.send(ctx, batch)
        return changed

    def _announce(self, tp: TopicPartition, strategy: str, **fields: Any) -> None:
        s = self.ctx.states[tp]
        slog.event(
            "leader_elected",
            tp=str(tp),
            leader=s.leader,
            leader_epoch=s.leader_epoch,
            isr=list(s.isr),
            strategy=strategy,
            **fields,
        )

    def _send_state(
        self, batch: RequestBatch, tp: TopicPartition, exclude: Iterable[int] = ()
    ) -> None:
        live = [
            b for b in self.ctx.assignments[tp] if b in self.ctx.live_brokers and b not in exclude
        ]
        batch.add_leader_and_isr(live, tp, self.ctx.live_or_shutting_down())

    async def _initialize_new_partitions(
        self, tps: Iterable[TopicPartition], batch: RequestBatch
    ) -> None:
        """Reference §1.5: a state znode for each new partition with a live replica, all
        created in one pipelined batch; one left by a previous controller is adopted."""
        ctx = self.ctx
        new: dict[TopicPartition, LeaderAndIsr] = {}
        for tp in tps:
            if tp in ctx.states or ctx.deletions.is_queued(tp.topic):
                continue
            state = elections.initial_state(ctx.assignments[tp], ctx.online(), ctx.epoch)
            if state is None:
                slog.event(
                    "partition_stays_new",
                    logging.WARNING,
                    tp=str(tp),
                    reason="no replica is online",
                )
                continue
            new[tp] = state
        if not new:
            return
        versions = await asyncio.to_thread(
            self.store.create_partition_states_fenced, ctx.epoch_zk_version, new
        )
        existed = [tp for tp, version in versions.items() if version is None]
        adopted = await asyncio.to_thread(self.store.read_partition_states, existed)
        for tp, state in new.items():
            version = versions[tp]
            if version is None:  # created meanwhile (e.g. by a previous controller): adopt it
                if tp not in adopted:
                    continue
                ctx.states[tp] = adopted[tp]
            else:
                ctx.states[tp] = replace(state, zk_version=version)
                slog.event(
                    "partition_initialized",
                    tp=str(tp),
                    leader=state.leader,
                    isr=list(state.isr),
                    leader_epoch=state.leader_epoch,
                )
            self._send_state(batch, tp)
            batch.is_new.add(tp)

    async def _elect_offline(self, batch: RequestBatch) -> list[TopicPartition]:
        """Offline-partition elections (reference §5.5) for partitions whose leader is gone."""
        ctx = self.ctx
        unclean_default = self.settings.get_bool("unclean.leader.election.enable")
        unclean: set[TopicPartition] = set()

        def decide(tp: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            if fresh.leader in ctx.online():
                return None  # someone already elected a live leader
            out = elections.offline_election(
                ctx.assignments[tp],
                fresh,
                ctx.online(),
                ctx.unclean_allowed(tp.topic, unclean_default),
                ctx.epoch,
            )
            if out is None:
                return None
            if out.unclean:
                unclean.add(tp)
            else:  # decided again after a BADVERSION
                unclean.discard(tp)
            return out.state

        started = time.perf_counter()
        offline = ctx.offline_partitions()
        changed = await self._write_states(offline, decide)
        for tp in changed:
            self._send_state(batch, tp)
            self._announce(tp, "offline", unclean=tp in unclean)
            if tp in unclean:
                self.metrics.unclean_elections.inc()
        for tp in set(offline) - set(changed):
            failed = ctx.states.get(tp)
            slog.event(
                "leader_election_failed",
                logging.WARNING,
                tp=str(tp),
                isr=list(failed.isr) if failed else None,
                reason="no live ISR member",
            )
        if offline:
            self.metrics.elections.observe((time.perf_counter() - started) * 1000)
        return changed

    async def _remove_replicas_from_isr(self, brokers: set[int], batch: RequestBatch) -> None:
        """Reference §5.6: ISR removal of offline replicas, epoch + 1, never an empty ISR."""
        ctx = self.ctx
        for b in sorted(brokers):
            # A topic being deleted is left alone (onReplicasBecomeOffline): its replicas are
            # the deletion's, and a LeaderAndIsr would bring deleted ones back.
            tps = [
                tp
                for tp in ctx.partitions_on(b)
                if tp in ctx.states and not ctx.deletions.is_queued(tp.topic)
            ]

            def decide(tp: TopicPartition, fresh: LeaderAndIsr, b: int = b) -> LeaderAndIsr | None:
                return elections.remove_from_isr(fresh, b, ctx.epoch)

            for tp in await self._write_states(tps, decide):
                s = ctx.states[tp]
                slog.event(
                    "replica_removed_from_isr",
                    tp=str(tp),
                    replica=b,
                    leader=s.leader,
                    isr=list(s.isr),
                    leader_epoch=s.leader_epoch,
                )
                self._send_state(batch, tp, exclude=[b])
