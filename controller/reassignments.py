"""Partition reassignment on the active controller (KIP-455 in ZooKeeper mode): Kafka 2.6's
`KafkaController.onPartitionReassignment` and its triggers, step by step
(shared/kafka-ops-reference.md §1; the sets are controller.logic.reassignment's).

Triggers: the AlterPartitionReassignments API (validated; it wins over the znode for the same
partition), the legacy /admin/reassign_partitions znode (on creation), an ISR change of a
partition being moved (a data watch on its state znode), a target broker's start-up, failover.

U1 write RS/AR/RR to /brokers/topics/<t> (version 2 JSON), U2 the same in memory, U3 stop the
adding replicas a replacement no longer needs; watch the state znode. Not complete (TRS ⊄ ISR):
A1 bump the leader epoch and send LeaderAndIsr to RS; the new replicas start as followers
outside the ISR and join it by the leader's ordinary expand rule. Complete: B2 RS = TRS in
memory, B3 a new leader from TRS if the leader is not in it (or dead), else an epoch bump and
LeaderAndIsr, B4 the removed replicas out of the ISR with StopReplica(delete=false), B5
StopReplica(delete=true), B6 RS = TRS in ZooKeeper, B7 the partition out of the znode (deleted
when empty), B8 UpdateMetadata to every broker. Each step is a structured event.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from controller.logic import elections, reassignment
from controller.logic.batch import RequestBatch
from controller.logic.reassignment import ReplicaAssignment
from controller.state_changes import StateChanges
from minibroker.core.errors import ErrorCode
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_store import ControllerMoved, Stat, ZkNoNode

# An answer per partition: (error, message); NONE with message None when accepted.
Outcome = tuple[ErrorCode, str | None]
NO_SUCH_PARTITION: Outcome = (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
NOTHING_TO_CANCEL: Outcome = (
    ErrorCode.NO_REASSIGNMENT_IN_PROGRESS,
    "No partition reassignment is in progress.",  # Kafka's default message of the error
)


class ReassignmentOps(StateChanges):
    def _reassign_init(self) -> None:
        # The ISR watch of each partition being moved, by a token of its own: a watch whose
        # token is no longer its partition's ends when it next fires (kazoo's threads read this
        # dict; only the controller's loop changes it). Cleared at failover: Kafka unregisters
        # them when it resigns.
        self._isr_watched: dict[TopicPartition, object] = {}

    # ---- triggers ------------------------------------------------------------------------

    async def on_api_reassignment(
        self, requests: Mapping[TopicPartition, Sequence[int] | None]
    ) -> dict[TopicPartition, Outcome]:
        """processApiPartitionReassignment: validate each target (a cancellation has none),
        take the partitions out of the znode (the latest request wins), trigger the rest."""
        ctx = self.ctx
        results: dict[TopicPartition, Outcome] = {}
        todo: dict[TopicPartition, ReplicaAssignment] = {}
        for tp, target in requests.items():
            current = ctx.full_assignment(tp)  # empty for an unknown partition, as in Kafka
            problem = (
                None
                if target is None
                else reassignment.validate_replicas(target, current, ctx.online())
            )
            if problem is not None:
                results[tp] = problem
                continue
            built = reassignment.build_reassignment(current, target)
            if built is None:
                results[tp] = NOTHING_TO_CANCEL
            else:
                todo[tp] = built  # an unknown partition: UNKNOWN_TOPIC_OR_PARTITION below
        await self._remove_from_zk_reassignment(lambda tp, _r: tp in todo)
        results.update(await self._trigger(todo, cause="api"))
        return results

    async def on_zk_reassignment(self) -> set[TopicPartition]:
        """processZkPartitionReassignment: every entry of /admin/reassign_partitions; those
        that cannot start (an unknown partition) leave the znode. Returns the started ones."""
        got = await asyncio.to_thread(self.store.get_or_none, ReassignPartitionsZNode.path)
        if got is None:
            return set()
        todo = {}
        failed: set[TopicPartition] = set()
        for tp, target in ReassignPartitionsZNode.decode(got[0]).items():
            if tp not in self.ctx.assignments:
                failed.add(tp)
                continue
            built = reassignment.build_reassignment(self.ctx.full_assignment(tp), target)
            if built is None:
                failed.add(tp)
            else:
                todo[tp] = built
        results = await self._trigger(todo, cause="zookeeper")
        failed |= {tp for tp, (error, _) in results.items() if error is not ErrorCode.NONE}
        if failed:
            await self._remove_from_zk_reassignment(lambda tp, _r: tp in failed)
        return {tp for tp in todo if tp not in failed}

    async def on_reassignment_isr_change(self, tp: TopicPartition) -> None:
        """processPartitionReassignmentIsrChange: the moved partition's ISR changed."""
        current = self.ctx.reassigning.get(tp)
        if current is None:
            return
        state = await self._read_state(tp)
        if state is not None and reassignment.is_complete(current, state.isr):
            slog.event(
                "reassignment_caught_up", tp=str(tp), target=list(current.target),
                isr=list(state.isr),
            )  # fmt: skip
            await self.on_partition_reassignment(tp, current, cause="isr_change")

    async def resume_reassignments(
        self, should_resume: Callable[[TopicPartition, ReplicaAssignment], bool], cause: str
    ) -> None:
        """maybeResumeReassignments (broker start-up, failover)."""
        for tp, current in sorted(self.ctx.reassigning.items()):
            if should_resume(tp, current):
                await self.on_partition_reassignment(tp, current, cause=cause)

    def list_reassignments(
        self, tps: Iterable[TopicPartition] | None
    ) -> dict[TopicPartition, ReplicaAssignment]:
        """processListPartitionReassignments: the given (or every) partition being moved."""
        wanted = self.ctx.reassigning if tps is None else tps
        return {tp: self.ctx.reassigning[tp] for tp in wanted if tp in self.ctx.reassigning}

    async def _trigger(
        self, todo: Mapping[TopicPartition, ReplicaAssignment], cause: str
    ) -> dict[TopicPartition, Outcome]:
        """maybeTriggerPartitionReassignment: a topic being deleted cannot be moved."""
        results: dict[TopicPartition, Outcome] = {}
        for tp, assignment in todo.items():
            if self.ctx.deletions.is_queued(tp.topic) or tp not in self.ctx.assignments:
                results[tp] = NO_SUCH_PARTITION
                continue
            try:
                await self.on_partition_reassignment(tp, assignment, cause=cause)
            except ControllerMoved:
                raise
            except Exception as exc:  # this partition fails; the others go on, as in Kafka
                slog.event(
                    "reassignment_failed", logging.ERROR, tp=str(tp), error=repr(exc),
                    cause=cause,
                )  # fmt: skip
                results[tp] = (ErrorCode.UNKNOWN_SERVER_ERROR, repr(exc))
                continue
            results[tp] = (ErrorCode.NONE, None)
        return results

    # ---- onPartitionReassignment ---------------------------------------------------------

    async def on_partition_reassignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment, cause: str
    ) -> None:
        self.ctx.deletions.halt({tp.topic})  # no deletion while a partition of it moves
        await self._update_current_reassignment(tp, assignment, cause)
        state = await self._read_state(tp)
        if state is None or not reassignment.is_complete(assignment, state.isr):
            await self._bump_and_send(tp, assignment)  # A1 (A2: the new ones are among RS)
            for b in assignment.adding:
                slog.event(
                    "replica_added", tp=str(tp), replica=b, in_isr=False,
                    online=b in self.ctx.online(),
                )  # fmt: skip
        else:
            await self._complete_reassignment(tp, assignment)

    async def _update_current_reassignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment, cause: str
    ) -> None:
        """U1-U3, then the ISR watch."""
        current = self.ctx.full_assignment(tp)
        if current != assignment:
            await self._write_assignment(tp, assignment)  # U1
            self.ctx.set_assignment(tp, assignment)  # U2
            unneeded = [b for b in current.replicas if b not in assignment.replicas]
            if unneeded:  # U3
                await self._stop_removed_replicas(tp, unneeded)
            event = "reassignment_started" if assignment.is_being_reassigned else (
                "reassignment_cancelled"
            )  # fmt: skip
            slog.event(
                event, tp=str(tp), origin=list(assignment.origin), target=list(assignment.target),
                replicas=list(assignment.replicas), adding=list(assignment.adding),
                removing=list(assignment.removing), cause=cause,
            )  # fmt: skip
        if assignment.is_being_reassigned:
            await self._watch_isr(tp)

    async def _complete_reassignment(
        self, tp: TopicPartition, assignment: ReplicaAssignment
    ) -> None:
        ctx = self.ctx
        completed = assignment.completed()
        ctx.set_assignment(tp, completed)  # B2
        await self._move_leader_if_required(tp, completed)  # B3
        await self._stop_removed_replicas(tp, list(assignment.removing))  # B4, B5
        await self._write_assignment(tp, completed)  # B6
        self._isr_watched.pop(tp, None)  # B7
        await self._remove_from_zk_reassignment(
            lambda p, replicas: p == tp and tuple(replicas) == completed.replicas
        )
        batch = RequestBatch()  # B8
        batch.add_update_metadata(ctx.live_or_shutting_down(), [tp])
        self.channels.send(ctx, batch)
        state = ctx.states.get(tp)
        slog.event(
            "reassignment_completed", tp=str(tp), replicas=list(completed.replicas),
            removed=list(assignment.removing), leader=state.leader if state else None,
            isr=list(state.isr) if state else None,
        )  # fmt: skip
        if not any(p.topic == tp.topic for p in ctx.reassigning):
            # No partition of the topic moves any more: a deletion waiting for that goes on.
            ctx.deletions.resume_topics({tp.topic})
            await self.resume_deletions()

    async def _move_leader_if_required(
        self, tp: TopicPartition, completed: ReplicaAssignment
    ) -> None:
        """B3: a leader outside TRS, or dead, is replaced by the first live target replica in
        the ISR; otherwise the epoch is bumped so the leader learns RS = TRS."""
        ctx = self.ctx
        state = ctx.states.get(tp)
        leader = state.leader if state else -1
        if leader in completed.replicas and leader in ctx.online():
            await self._bump_and_send(tp, completed)
            return

        def decide(p: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            new = reassignment.reassignment_leader(completed.target, fresh.isr, ctx.online())
            if new is None:
                return None
            return LeaderAndIsr(new, fresh.leader_epoch + 1, fresh.isr, ctx.epoch, fresh.zk_version)

        batch = RequestBatch()
        for p in await self._write_states([tp], decide):
            self._announce(p, "reassignment")
            self._send_state(batch, p)
        self.channels.send(ctx, batch)

    async def _stop_removed_replicas(self, tp: TopicPartition, removed: list[int]) -> None:
        """B4 and B5 (and U3): each removed replica leaves the ISR (a LeaderAndIsr to the rest),
        gets StopReplica(delete=false), then StopReplica(delete=true)."""
        if not removed:
            return
        ctx = self.ctx
        batch = RequestBatch()
        for b in removed:

            def decide(p: TopicPartition, fresh: LeaderAndIsr, b: int = b) -> LeaderAndIsr | None:
                return elections.remove_from_isr(fresh, b, ctx.epoch)

            for p in await self._write_states([tp], decide):
                self._send_state(batch, p, exclude=removed)
            if b in ctx.live_brokers:
                batch.add_stop_replica(b, tp, -1, delete=False)
                batch.add_stop_replica(b, tp, -1, delete=True)
            slog.event("replica_removed", tp=str(tp), replica=b, deleted=b in ctx.live_brokers)
        self.channels.send(ctx, batch)

    async def _bump_and_send(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """updateLeaderEpochAndSendRequest: the same leader and ISR at epoch + 1, then
        LeaderAndIsr (with RS, AR and RR) to every live replica of `assignment`."""
        ctx = self.ctx

        def decide(p: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            return LeaderAndIsr(
                fresh.leader, fresh.leader_epoch + 1, fresh.isr, ctx.epoch, fresh.zk_version
            )

        batch = RequestBatch()
        for p in await self._write_states([tp], decide):
            live = [b for b in assignment.replicas if b in ctx.live_brokers]
            batch.add_leader_and_isr(live, p, ctx.live_or_shutting_down())
        self.channels.send(ctx, batch)

    # ---- ZooKeeper -----------------------------------------------------------------------

    async def _read_state(self, tp: TopicPartition) -> LeaderAndIsr | None:
        states = await asyncio.to_thread(self.store.read_partition_states, [tp])
        if tp in states:
            self.ctx.states[tp] = states[tp]
        return states.get(tp)

    async def _write_assignment(self, tp: TopicPartition, assignment: ReplicaAssignment) -> None:
        """The topic's znode with every partition's full assignment, `tp`'s replaced (Kafka's
        updateReplicaAssignmentForPartition), fenced by the controller epoch."""
        ctx = self.ctx
        full = {p: ctx.full_assignment(p) for p in ctx.partitions_of(tp.topic)}
        full[tp] = assignment
        data = TopicZNode.encode(
            TopicAssignment(
                {p.partition: a.replicas for p, a in full.items()},
                {p.partition: a.adding for p, a in full.items() if a.adding},
                {p.partition: a.removing for p, a in full.items() if a.removing},
            )
        )
        await asyncio.to_thread(
            self.store.set_fenced, ctx.epoch_zk_version, TopicZNode.path(tp.topic), data
        )

    async def _remove_from_zk_reassignment(
        self, remove: Callable[[TopicPartition, tuple[int, ...]], bool]
    ) -> None:
        """maybeRemoveFromZkReassignment: rewrite /admin/reassign_partitions without the
        matching entries; delete it when none is left."""
        got = await asyncio.to_thread(self.store.get_or_none, ReassignPartitionsZNode.path)
        if got is None:
            return
        entries = ReassignPartitionsZNode.decode(got[0])
        kept = {tp: r for tp, r in entries.items() if not remove(tp, r)}
        if len(kept) == len(entries):
            return
        path, fence = ReassignPartitionsZNode.path, self.ctx.epoch_zk_version
        with contextlib.suppress(ZkNoNode):
            if kept:
                data = ReassignPartitionsZNode.encode(kept)
                await asyncio.to_thread(self.store.set_fenced, fence, path, data)
            else:
                await asyncio.to_thread(self.store.delete_fenced, fence, path)

    async def _watch_isr(self, tp: TopicPartition) -> None:
        """PartitionReassignmentIsrChangeHandler: the state znode's changes become events."""
        if tp in self._isr_watched:
            return
        token = self._isr_watched[tp] = object()
        first = [True]

        def changed(_data: bytes | None, _stat: Stat | None) -> bool:
            if self._isr_watched.get(tp) is not token:
                return False  # the move ended (or a newer watch took over): this one ends
            if not first[0]:  # kazoo calls once at once: the caller decides from that state
                self.post_threadsafe("PartitionReassignmentIsrChange", tp)
            first[0] = False
            return True

        await asyncio.to_thread(self.store.watch_data, TopicPartitionStateZNode.path(tp), changed)
