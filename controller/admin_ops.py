"""Admin operations of the active controller beside reassignment and deletion: partitions
added to a topic (KIP-195, `KafkaController.processPartitionModifications` on a data watch of
/brokers/topics/<t>) and the ElectLeaders API (KIP-460, `processReplicaLeaderElection`,
preferred or unclean)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from controller.logic import elections
from controller.logic.batch import RequestBatch
from controller.state_changes import StateChanges
from controller.zk_view import read_assignment, read_topic_configs
from minibroker.core.errors import ErrorCode
from minibroker.core.types import NO_LEADER, LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import TopicAssignment, TopicZNode
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_store import Stat

PREFERRED, UNCLEAN = 0, 1  # ElectLeaders' election types
NO_PARTITION = "The partition does not exist."
NOT_NEEDED = "Leader election not needed for topic partition."  # the error's own message
ElectionOutcome = tuple[ErrorCode, str | None]


class AdminOps(StateChanges):
    # ---- partitions added (KIP-195) ------------------------------------------------------

    async def _watch_topic(self, topic: str) -> None:
        """PartitionModificationsHandler: the topic znode's changes become events (once per
        topic; the watch ends when the topic is deleted)."""
        if topic in self._watched_topics:
            return
        self._watched_topics.add(topic)

        def changed(_data: bytes | None, stat: Stat | None) -> bool:
            if topic not in self._watched_topics:
                return False
            if stat is not None:
                self.post_threadsafe("PartitionModifications", topic)
            return True

        await asyncio.to_thread(self.store.watch_data, TopicZNode.path(topic), changed)

    async def on_partition_modifications(self, topic: str) -> None:
        """New partitions in the topic's znode get replicas, state and leaders; a topic being
        deleted has its znode restored instead, as Kafka does."""
        ctx = self.ctx
        if topic not in ctx.topics():
            return  # a new topic: TopicChange loads it
        full = await asyncio.to_thread(read_assignment, self.store, topic)
        added = {tp: a for tp, a in full.items() if tp not in ctx.assignments}
        if not added:
            return
        if ctx.deletions.is_queued(topic):
            slog.event(
                "partitions_not_added", topic=topic,
                partitions=sorted(tp.partition for tp in added),
                reason="the topic is being deleted",
            )  # fmt: skip
            kept = {tp: ctx.full_assignment(tp) for tp in ctx.partitions_of(topic)}
            data = TopicZNode.encode(
                TopicAssignment(
                    {tp.partition: a.replicas for tp, a in kept.items()},
                    {tp.partition: a.adding for tp, a in kept.items() if a.adding},
                    {tp.partition: a.removing for tp, a in kept.items() if a.removing},
                )
            )
            await asyncio.to_thread(
                self.store.set_fenced, ctx.epoch_zk_version, TopicZNode.path(topic), data
            )
            return
        for tp, assignment in added.items():
            ctx.set_assignment(tp, assignment)
        batch = RequestBatch()
        await self._initialize_new_partitions(sorted(added), batch)
        self.channels.send(ctx, batch)
        slog.event(
            "partitions_added",
            topic=topic,
            partitions={str(tp.partition): list(a.replicas) for tp, a in sorted(added.items())},
            total=len(ctx.partitions_of(topic)),
        )
        self._update_gauges()

    # ---- ElectLeaders (KIP-460) ----------------------------------------------------------

    async def on_elect_leaders(
        self, election_type: int, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, tuple[ErrorCode, str | None, int]]:
        """processReplicaLeaderElection triggered by an admin client: per partition (error,
        message, leader). `tps` None means every partition."""
        ctx = self.ctx
        wanted = sorted(ctx.assignments) if tps is None else list(tps)
        out: dict[TopicPartition, tuple[ErrorCode, str | None, int]] = {}
        electable = []
        for tp in wanted:
            state = ctx.states.get(tp)
            if tp not in ctx.assignments or state is None:
                out[tp] = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, NO_PARTITION, -1)
            elif ctx.deletions.is_queued(tp.topic):
                out[tp] = (ErrorCode.INVALID_TOPIC_EXCEPTION, "The topic is being deleted", -1)
            elif self._election_not_needed(election_type, tp, state.leader):
                out[tp] = (ErrorCode.ELECTION_NOT_NEEDED, NOT_NEEDED, state.leader)
            else:
                electable.append(tp)
        if election_type == PREFERRED:
            changed = set(await self.elect_preferred(electable, cause="admin_client"))
            strategy, failure = "PreferredReplicaPartitionLeaderElectionStrategy", (
                ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE
            )  # fmt: skip
        else:
            changed = set(await self._elect_unclean(electable))
            strategy = "OfflinePartitionLeaderElectionStrategy(true)"
            failure = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
        for tp in electable:
            if tp in changed:
                out[tp] = (ErrorCode.NONE, None, ctx.states[tp].leader)
            else:
                out[tp] = (
                    failure,
                    f"Failed to elect leader for partition {tp} under strategy {strategy}",
                    -1,
                )
        return out

    def _election_not_needed(self, election_type: int, tp: TopicPartition, leader: int) -> bool:
        """A preferred election where the preferred replica leads, an unclean one where a
        live broker leads: ELECTION_NOT_NEEDED."""
        if election_type == PREFERRED:
            return leader == self.ctx.assignments[tp][0]
        return leader in self.ctx.online()

    async def _elect_unclean(self, tps: list[TopicPartition]) -> list[TopicPartition]:
        """OfflinePartitionLeaderElectionStrategy(allowUnclean = true): the first live ISR
        replica, else the first live replica at all."""
        ctx = self.ctx
        await self.refresh_topic_configs({tp.topic for tp in tps})

        def decide(tp: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            if fresh.leader in ctx.online() and fresh.leader != NO_LEADER:
                return None
            out = elections.offline_election(
                ctx.assignments[tp], fresh, ctx.online(), True, ctx.epoch
            )
            return out.state if out is not None else None

        batch = RequestBatch()
        changed = await self._write_states(tps, decide)
        for tp in changed:
            self._send_state(batch, tp)
            self._announce(tp, "offline", cause="admin_client", unclean=True)
            self.metrics.unclean_elections.inc()
        self.channels.send(ctx, batch)
        return changed

    async def refresh_topic_configs(self, topics: set[str]) -> None:
        """The topics' overrides read afresh (Kafka's controller reads the log configs when
        it needs unclean.leader.election.enable, so a changed config counts at once)."""
        if topics:
            configs = await asyncio.to_thread(read_topic_configs, self.store, sorted(topics))
            self.ctx.topic_configs.update(configs)
