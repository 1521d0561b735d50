"""What the active controller does for each event (Kafka's KafkaController.onXxx, §5.2–§5.8).

Each operation reads ZooKeeper afresh where Kafka does, asks controller.logic for decisions,
changes partition state through controller.state_changes (fenced, conditional writes), updates
the in-memory view and sends one request batch. Runs on the controller's event loop, one
operation at a time.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import Any

from controller.admin_ops import AdminOps
from controller.logic import elections
from controller.logic.batch import RequestBatch
from controller.logic.context import BrokerInfo, ControllerContext
from controller.reassignments import ReassignmentOps
from controller.topic_deletion import DeletionOps
from controller.zk_view import read_brokers, read_states, read_topic, read_topics
from minibroker.core.errors import ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    IsrChangeNotificationSequenceZNode,
    IsrChangeNotificationZNode,
    PreferredReplicaElectionZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_store import ZkNoNode


class ControllerOps(ReassignmentOps, DeletionOps, AdminOps):
    """The event handlers of the active controller."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._reassign_init()

    async def handle(self, name: str, payload: Any) -> Any:
        """Run the operation for one active-controller event; its result answers an RPC."""
        if name == "BrokerChange":
            return await self.on_broker_change()
        if name == "TopicChange":
            return await self.on_topic_change()
        if name == "IsrChangeNotification":
            return await self.on_isr_change_notification()
        if name == "PreferredReplicaElection":
            return await self.on_preferred_replica_election()
        if name == "AutoPreferredReplicaLeaderElection":
            return await self.on_auto_rebalance()
        if name == "PartitionModifications":
            return await self.on_partition_modifications(payload)
        if name == "TopicDeletion":
            return await self.on_topic_deletion()
        if name == "TopicDeletionStopReplicaResponseReceived":
            return await self.on_stop_replica_answer(payload)
        if name == "ZkPartitionReassignment":
            return await self.on_zk_reassignment()
        if name == "PartitionReassignmentIsrChange":
            return await self.on_reassignment_isr_change(payload)
        if name == "AlterPartitionReassignments":
            return ErrorCode.NONE, await self.on_api_reassignment(payload)
        if name == "ListPartitionReassignments":
            return ErrorCode.NONE, self.list_reassignments(payload)
        if name == "ElectLeaders":
            return ErrorCode.NONE, await self.on_elect_leaders(*payload)
        raise ValueError(f"no operation for event {name}")

    # ---- failover (§5.2) -----------------------------------------------------------------

    async def on_failover(self, epoch: int, epoch_zk_version: int) -> None:
        self.ctx = ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        self._isr_watched.clear()  # a previous term's watches end when they next fire
        ctx.live_brokers = await asyncio.to_thread(read_brokers, self.store, self.listener)
        for topic in await asyncio.to_thread(read_topics, self.store):
            await self._load_topic(topic)
        ctx.states = await asyncio.to_thread(read_states, self.store, sorted(ctx.assignments))
        slog.event(
            "controller_context_loaded",
            epoch=epoch,
            live_brokers=sorted(ctx.live_brokers),
            topics=sorted(ctx.topics()),
            partitions=len(ctx.assignments),
        )
        # UpdateMetadata to every broker before any LeaderAndIsr, so followers know the
        # leaders are alive (pitfall 17).
        first = RequestBatch()
        first.add_update_metadata(ctx.live_or_shutting_down(), [])
        self.channels.send(ctx, first)
        batch = RequestBatch()
        for tp, _state in sorted(ctx.states.items()):
            live = [b for b in ctx.assignments[tp] if b in ctx.live_brokers]
            batch.add_leader_and_isr(live, tp, ctx.live_or_shutting_down())
        await self.init_deletions()  # before elections: a topic being deleted has no leader
        await self._initialize_new_partitions(sorted(ctx.assignments), batch)
        await self._elect_offline(batch)
        dead = {b for tp in ctx.assignments for b in ctx.assignments[tp]} - set(ctx.live_brokers)
        await self._remove_replicas_from_isr(dead, batch)
        self.channels.send(ctx, batch)
        await self.on_isr_change_notification(leftover=True)
        # initializePartitionReassignments: the znode's first (they replace API ones), then
        # the moves the topic znodes record, then deletions and preferred elections.
        from_zk = await self.on_zk_reassignment()
        await self.resume_reassignments(lambda tp, _a: tp not in from_zk, cause="failover")
        await self.resume_deletions()
        await self.on_preferred_replica_election()
        self._update_gauges()

    async def _load_topic(self, topic: str) -> list[TopicPartition]:
        parts, config = await asyncio.to_thread(read_topic, self.store, topic)
        for tp, assignment in parts.items():
            self.ctx.set_assignment(tp, assignment)
        self.ctx.topic_configs[topic] = config
        await self._watch_topic(topic)
        return sorted(parts)

    # ---- broker membership (§5.3) --------------------------------------------------------

    async def on_broker_change(self) -> None:
        ctx = self.ctx
        started = time.perf_counter()
        current = await asyncio.to_thread(read_brokers, self.store, self.listener)
        new = set(current) - set(ctx.live_brokers)
        dead = set(ctx.live_brokers) - set(current)
        bounced = {
            b
            for b in set(current) & set(ctx.live_brokers)
            if current[b].epoch > ctx.live_brokers[b].epoch
        }
        if not (new or dead or bounced):
            ctx.live_brokers = current  # a data change only
            return
        slog.event("broker_change", new=sorted(new), dead=sorted(dead), bounced=sorted(bounced))
        if dead or bounced:
            for b in dead | bounced:
                ctx.live_brokers.pop(b, None)
                ctx.shutting_down.discard(b)
            self.on_replicas_offline(dead | bounced)  # deletions of their replicas halt
            # Elections first, and their LeaderAndIsr sent at once: as in Kafka, where the
            # partition state machine sends its batch before the replica state machine
            # starts the ISR removals (reference §5.3 steps 2 and 3), so the new leaders
            # lead without waiting for every removal write.
            elected = RequestBatch()
            lost_leaders = await self._elect_offline(elected)
            self.channels.send(ctx, elected)
            batch = RequestBatch()
            await self._remove_replicas_from_isr(dead | bounced, batch)
            if not lost_leaders:
                batch.add_update_metadata(ctx.live_or_shutting_down(), [])
            self.channels.send(ctx, batch)
        if dead or bounced:
            await self.resume_deletions()  # failReplicaDeletion runs a round too
        if new or bounced:
            await self._on_broker_startup(new | bounced, current)
        ctx.live_brokers = current
        self.metrics.elections.observe((time.perf_counter() - started) * 1000)
        self._update_gauges()

    async def _on_broker_startup(self, started: set[int], current: dict[int, BrokerInfo]) -> None:
        ctx = self.ctx
        ctx.live_brokers = dict(current)
        first = RequestBatch()
        first.add_update_metadata(ctx.live_or_shutting_down() - started, [])
        first.add_update_metadata(started, ctx.states)  # the new ones get every partition
        self.channels.send(ctx, first)
        batch = RequestBatch()
        for b in sorted(started):
            for tp in ctx.partitions_on(b):
                # A topic being deleted gets StopReplica from the deletion, not LeaderAndIsr.
                if tp in ctx.states and not ctx.deletions.is_queued(tp.topic):
                    batch.add_leader_and_isr([b], tp, ctx.live_or_shutting_down())
        await self._initialize_new_partitions(sorted(ctx.assignments), batch)
        await self._elect_offline(batch)
        self.channels.send(ctx, batch)
        # Moves waiting for one of these brokers, and deletions waiting for their replicas.
        await self.resume_reassignments(
            lambda _tp, a: bool(set(a.target) & started), cause="broker_started"
        )
        ctx.deletions.resume_topics(
            {tp.topic for b in started for tp in ctx.partitions_on(b)} & ctx.deletions.queued
        )
        await self.resume_deletions()

    # ---- topics ----------------------------------------------------------------------------

    async def on_topic_change(self) -> None:
        ctx = self.ctx
        topics = set(await asyncio.to_thread(read_topics, self.store))
        for gone in ctx.topics() - topics:  # removed by hand (the controller's own deletion
            ctx.remove_topic(gone)  # forgets the topic before its znode goes)
            self._watched_topics.discard(gone)
        batch = RequestBatch()
        for topic in sorted(topics - ctx.topics()):
            tps = await self._load_topic(topic)
            slog.event(
                "topic_created",
                topic=topic,
                partitions=len(tps),
                config=ctx.topic_configs.get(topic, {}),
            )
            await self._initialize_new_partitions(tps, batch)
        self.channels.send(ctx, batch)
        self._update_gauges()

    # ---- ISR change notifications (§5.7) -------------------------------------------------

    async def on_isr_change_notification(self, leftover: bool = False) -> None:
        ctx = self.ctx
        children = await asyncio.to_thread(self.store.children, IsrChangeNotificationZNode.path)
        if not children:
            return
        changed: set[TopicPartition] = set()
        created_ms: list[int] = []
        paths = [IsrChangeNotificationSequenceZNode.path(child) for child in children]
        try:
            for got in (await asyncio.to_thread(self.store.get_many, paths)).values():
                if got is not None:
                    changed.update(IsrChangeNotificationSequenceZNode.decode(got[0]))
                    created_ms.append(got[1].ctime_ms)
            known = sorted(tp for tp in changed if tp in ctx.assignments)
            ctx.states.update(await asyncio.to_thread(read_states, self.store, known))
            batch = RequestBatch()
            batch.add_update_metadata(ctx.live_or_shutting_down(), known)
            answers = self.channels.send(ctx, batch)
            slog.event(
                "isr_change_processed",
                nodes=children,
                leftover=leftover,
                partitions=[f"{tp}:{list(ctx.states[tp].isr)}" for tp in known],
            )
            self._watch_propagation(children, min(created_ms, default=now_ms()), answers)
        finally:
            await asyncio.to_thread(self.store.delete_many_fenced, ctx.epoch_zk_version, paths)

    def _watch_propagation(
        self, nodes: list[str], created_ms: int, answers: dict[int, asyncio.Future[int]]
    ) -> None:
        """Log `update_metadata_propagated` once every broker answered the UpdateMetadata (or
        after 10 s): the time from the first isr_change node's creation to the last answer."""

        async def watch() -> None:
            done, _ = await asyncio.wait(answers.values(), timeout=10.0)
            answered = sorted(b for b, f in answers.items() if f in done)
            slog.event(
                "update_metadata_propagated",
                cause="isr_change",
                nodes=nodes,
                brokers=answered,
                not_answered=sorted(set(answers) - set(answered)),
                took_ms=now_ms() - created_ms,
            )

        if answers:
            task = asyncio.ensure_future(watch())
            self._background.add(task)  # keep a reference until done
            task.add_done_callback(self._background.discard)

    # ---- preferred replica election (§5.5) -----------------------------------------------

    async def on_preferred_replica_election(self) -> None:
        got = await asyncio.to_thread(self.store.get_or_none, PreferredReplicaElectionZNode.path)
        if got is None:
            return
        try:
            tps = PreferredReplicaElectionZNode.decode(got[0]) if got[0] else ()
            await self.elect_preferred(
                [
                    tp
                    for tp in tps
                    if tp in self.ctx.assignments and not self.ctx.deletions.is_queued(tp.topic)
                ],
                cause="admin",
            )
        finally:
            with contextlib.suppress(ZkNoNode):
                await asyncio.to_thread(
                    self.store.delete_fenced,
                    self.ctx.epoch_zk_version,
                    PreferredReplicaElectionZNode.path,
                )

    async def on_auto_rebalance(self) -> None:
        ctx = self.ctx
        # Read the states afresh (Kafka trusts its cache): a leader moved by anyone else, e.g.
        # by hand in a test bed, is seen too. One read per partition per check interval.
        ctx.states.update(await asyncio.to_thread(read_states, self.store, sorted(ctx.states)))
        leaders = {tp: s.leader for tp, s in ctx.states.items()}
        pct = self.settings.get_int("leader.imbalance.per.broker.percentage")
        imbalanced = elections.imbalanced_brokers(ctx.assignments, leaders, pct)
        if ctx.reassigning:  # Kafka checks no imbalance while a reassignment is in progress
            return
        candidates = [
            tp
            for tp, replicas in sorted(ctx.assignments.items())
            if replicas
            and replicas[0] in imbalanced
            and leaders.get(tp) != replicas[0]
            and not ctx.shutting_down
            and tp not in ctx.reassigning
            and not ctx.deletions.is_queued(tp.topic)
        ]
        if candidates:
            await self.elect_preferred(candidates, cause="auto_rebalance")

    # ---- controlled shutdown (§5.8) ------------------------------------------------------

    async def on_controlled_shutdown(
        self, broker_id: int, broker_epoch: int
    ) -> tuple[ErrorCode, list[TopicPartition]]:
        ctx = self.ctx
        info = ctx.live_brokers.get(broker_id)
        if info is None:
            return ErrorCode.BROKER_NOT_AVAILABLE, []
        if broker_epoch not in (-1, info.epoch) and broker_epoch < info.epoch:
            return ErrorCode.STALE_BROKER_EPOCH, []
        ctx.shutting_down.add(broker_id)
        replicated = [
            tp
            for tp in ctx.partitions_on(broker_id)
            if tp in ctx.states and len(ctx.assignments[tp]) > 1
        ]
        led = [tp for tp in replicated if ctx.states[tp].leader == broker_id]
        followed = [tp for tp in replicated if ctx.states[tp].leader != broker_id]

        def decide(tp: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            return elections.controlled_shutdown_election(
                ctx.assignments[tp],
                fresh,
                ctx.live_or_shutting_down(),
                ctx.shutting_down,
                ctx.epoch,
            )

        # The moved leaderships go out before the followers' removal, as in Kafka's
        # doControlledShutdown (reference §5.8): one batch each.
        elected = RequestBatch()
        for tp in await self._write_states(led, decide):
            self._announce(tp, "controlled_shutdown")
            self._send_state(elected, tp)
        self.channels.send(ctx, elected)
        batch = RequestBatch()
        for tp in followed:
            batch.add_stop_replica(broker_id, tp, -1, delete=False)
        await self._remove_replicas_from_isr({broker_id}, batch)
        self.channels.send(ctx, batch)
        remaining = [tp for tp in replicated if ctx.states[tp].leader == broker_id]
        slog.event(
            "controlled_shutdown",
            broker=broker_id,
            moved=len(led) - len(remaining),
            remaining=[str(tp) for tp in remaining],
        )
        return ErrorCode.NONE, remaining
