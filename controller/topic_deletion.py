"""Topic deletion on the active controller (Kafka 2.6's TopicDeletionManager driven by
KafkaController.processTopicDeletion; the rules are controller.logic.deletion's).

/admin/delete_topics/<t> queues a topic (with `delete.topic.enable=false` the entries are
removed instead). Its partitions go offline for good (UpdateMetadata with leader -2: brokers
forget them, Metadata stops naming them); each live replica leaves the ISR and gets
StopReplica(delete=false) and StopReplica(delete=true), whose answers come back as
TopicDeletionStopReplicaResponseReceived events; a replica on a dead broker halts the topic
until the broker returns; a topic with a partition being reassigned waits for the move. When
every replica is deleted: /brokers/topics/<t> (with its partition states), /config/topics/<t>,
the groups' committed offsets of it and /admin/delete_topics/<t> go, and `topic_deleted` is
logged."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from controller.logic import elections
from controller.logic.batch import RequestBatch
from controller.logic.deletion import Replica
from controller.state_changes import StateChanges
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    ConfigEntityZNode,
    ConsumerOffsetZNode,
    DeleteTopicsTopicZNode,
    DeleteTopicsZNode,
    TopicZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_store import ZkNoNode

EPOCH_DURING_DELETE = -2  # StopReplica's leader epoch for a topic being deleted (KIP-570)


class DeletionOps(StateChanges):
    def _replicas_of(self, topic: str) -> list[Replica]:
        ctx = self.ctx
        return [(tp, b) for tp in ctx.partitions_of(topic) for b in ctx.assignments[tp]]

    async def init_deletions(self) -> None:
        """At failover (fetchTopicDeletionsInProgress): the queued topics, those with an offline
        replica or a partition being moved halted."""
        ctx = self.ctx
        ctx.deletions.enabled = self.settings.get_bool("delete.topic.enable")
        queued = await asyncio.to_thread(self._children, DeleteTopicsZNode.path)
        if not ctx.deletions.enabled:
            await self._drop_entries(queued)
            return
        await self._drop_entries([t for t in queued if t not in ctx.topics()])  # long gone
        ctx.deletions.enqueue(t for t in queued if t in ctx.topics())
        online = ctx.online()
        halted = {
            t
            for t in ctx.deletions.queued
            if any(b not in online for _, b in self._replicas_of(t))
            or any(tp.topic == t for tp in ctx.reassigning)
        }
        ctx.deletions.halt(halted)

    async def on_topic_deletion(self) -> None:
        """processTopicDeletion: /admin/delete_topics changed."""
        ctx = self.ctx
        requested = set(await asyncio.to_thread(self._children, DeleteTopicsZNode.path))
        unknown = requested - ctx.topics()
        if unknown:
            slog.event("topic_deletion_ignored", topics=sorted(unknown), reason="no such topic")
            await self._drop_entries(unknown)
        requested -= unknown
        if not ctx.deletions.enabled:
            slog.event(
                "topic_deletion_ignored", topics=sorted(requested),
                reason="delete.topic.enable is false",
            )  # fmt: skip
            await self._drop_entries(requested)
            return
        new = requested - ctx.deletions.queued
        if not new:
            await self.resume_deletions()
            return
        slog.event("topic_deletion_started", topics=sorted(new))
        ctx.deletions.enqueue(new)
        moving = {t for t in new if any(tp.topic == t for tp in ctx.reassigning)}
        if moving:
            ctx.deletions.halt(moving)
            slog.event(
                "topic_deletion_halted", topics=sorted(moving), reason="reassignment in progress"
            )
        await self.resume_deletions()

    def on_replicas_offline(self, brokers: set[int]) -> None:
        """onReplicasBecomeOffline for topics being deleted: their replicas there failed."""
        replicas = [
            (tp, b)
            for t in self.ctx.deletions.queued
            for tp, b in self._replicas_of(t)
            if b in brokers
        ]
        halted = self.ctx.deletions.fail(replicas)
        if halted:
            slog.event(
                "topic_deletion_halted", topics=sorted(halted), reason="replica offline",
                brokers=sorted(brokers),
            )  # fmt: skip

    async def on_stop_replica_answer(self, payload: tuple[int, Any]) -> None:
        """processTopicDeletionStopReplicaResponseReceived."""
        broker, response = payload
        ctx = self.ctx
        failed, deleted = [], []
        for t in response.partition_errors:
            r = (TopicPartition(t.topic_name, t.partition_index), broker)
            if not ctx.deletions.is_queued(r[0].topic):
                continue
            if response.error_code != 0 or t.error_code != 0:
                failed.append(r)
            else:
                deleted.append(r)
        if failed:
            halted = ctx.deletions.fail(failed)
            slog.event(
                "topic_deletion_halted", logging.WARNING, topics=sorted(halted),
                reason="StopReplica failed", broker=broker,
            )  # fmt: skip
        ctx.deletions.succeed(deleted)
        await self.resume_deletions()

    async def resume_deletions(self) -> None:
        """resumeDeletions: one round of the deletion rules, performed."""
        ctx = self.ctx
        online = ctx.online()
        plan = ctx.deletions.resume(self._replicas_of, lambda r: r[1] in online)
        for topic in plan.complete:
            await self._complete(topic)
        if plan.offline:
            batch = RequestBatch()  # leader -2 for these: brokers stop serving them
            batch.add_update_metadata(ctx.live_or_shutting_down(), plan.offline)
            self.channels.send(ctx, batch)
        if plan.halted:
            slog.event("topic_deletion_halted", topics=list(plan.halted), reason="replica offline")
        if plan.stop:
            await self._stop_for_deletion(list(plan.stop))

    async def _stop_for_deletion(self, replicas: list[Replica]) -> None:
        """OfflineReplica (out of the ISR, StopReplica without delete), then
        ReplicaDeletionStarted (StopReplica with delete, its answer an event)."""
        ctx = self.ctx
        by_broker: dict[int, list[TopicPartition]] = {}
        for tp, b in replicas:
            by_broker.setdefault(b, []).append(tp)
        for b, tps in sorted(by_broker.items()):

            def decide(tp: TopicPartition, fresh: LeaderAndIsr, b: int = b) -> LeaderAndIsr | None:
                return elections.remove_from_isr(fresh, b, ctx.epoch)

            await self._write_states(tps, decide)
        batch = RequestBatch()
        for tp, b in replicas:
            batch.add_stop_replica(b, tp, EPOCH_DURING_DELETE, delete=False)
        for tp, b in replicas:
            batch.add_stop_replica(b, tp, EPOCH_DURING_DELETE, delete=True)
        self.channels.send(
            ctx, batch, on_stop_replica=lambda b, answer: self.post(
                "TopicDeletionStopReplicaResponseReceived", (b, answer)
            ),
        )  # fmt: skip

    async def _complete(self, topic: str) -> None:
        """completeDeleteTopic: the topic's znodes (fenced), then its state in memory."""
        ctx = self.ctx
        partitions = len(ctx.partitions_of(topic))
        self._watched_topics.discard(topic)  # mutePartitionModifications
        fence = ctx.epoch_zk_version
        await asyncio.to_thread(self.store.delete_recursive_fenced, fence, TopicZNode.path(topic))
        await asyncio.to_thread(
            self.store.delete_many_fenced, fence,
            [ConfigEntityZNode.path("topics", topic), DeleteTopicsTopicZNode.path(topic)],
        )  # fmt: skip
        groups = await asyncio.to_thread(self._delete_committed_offsets, topic)
        ctx.remove_topic(topic)
        slog.event("topic_deleted", topic=topic, partitions=partitions, committed_offsets_of=groups)
        self._update_gauges()

    def _delete_committed_offsets(self, topic: str) -> list[str]:
        """The groups' committed offsets of the deleted topic (Kafka's group coordinator drops a
        deleted partition's offsets, GroupMetadataManager.cleanupGroupMetadata; minibroker keeps
        them in ZooKeeper, so the controller removes them). The groups that had some."""
        groups = []
        for group in self._children(ConsumerOffsetZNode.root):
            path = ConsumerOffsetZNode.topic_path(group, topic)
            with contextlib.suppress(ZkNoNode):
                if self.store.exists(path) is not None:
                    self.store.delete(path, recursive=True)
                    groups.append(group)
        return groups

    async def _drop_entries(self, topics: set[str] | list[str]) -> None:
        paths = [DeleteTopicsTopicZNode.path(t) for t in sorted(topics)]
        if paths:
            await asyncio.to_thread(self.store.delete_many_fenced, self.ctx.epoch_zk_version, paths)

    def _children(self, path: str) -> list[str]:
        try:
            return self.store.children(path)
        except ZkNoNode:
            return []
