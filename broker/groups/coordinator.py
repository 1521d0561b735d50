"""The group coordinator of one broker (Kafka's GroupCoordinator), on its event loop.

A group belongs to partition abs(hash(group)) % offsets.topic.num.partitions of
`__consumer_offsets`; the leader of that partition coordinates it (FindCoordinator answers that
leader, creating the topic on first use). Becoming leader, the broker loads the partition
(offsets_manager.py: COORDINATOR_LOAD_IN_PROGRESS meanwhile) and with it every group's last
stored generation and members, who go on heartbeating without a rebalance; losing it, the broker
forgets those groups and answers their waiting requests NOT_COORDINATOR. So a coordinator's
failover *is* a leader election, and a committed offset is exactly as safe as an acknowledged
record. Membership rules are group.py's; this shell holds the waiting JoinGroup and SyncGroup
answers, the rebalance deadlines and the session expiry, and stores each settled generation (the
leader's assignment, before anyone gets it) and each group that became empty. Offsets:
group_offsets.py."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Coroutine, Iterable
from typing import Any

from broker.groups.group import Group, GroupState, JoinResult, Member
from broker.groups.group_offsets import GroupOffsets
from broker.groups.offsets_manager import OffsetsManager
from broker.groups.offsets_topic import group_store_error
from broker.groups.persisted import group_value, loaded_group
from broker.log.log_types import wall_clock_ms
from broker.replica_manager import ReplicaManager
from minibroker.core.errors import ErrorCode
from minibroker.core.types import OFFSETS_TOPIC, TopicPartition
from minibroker.core.zk_layout import valid_group_id
from minibroker.runtime import logging as slog

EXPIRY_CHECK_S = 0.5

SyncAnswer = tuple[ErrorCode, bytes]


class GroupCoordinator:
    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        s = rm.settings
        self.min_session_ms = s.get_int("group.min.session.timeout.ms")
        self.max_session_ms = s.get_int("group.max.session.timeout.ms")
        self.initial_delay_ms = s.get_int("group.initial.rebalance.delay.ms")
        self.groups: dict[str, Group] = {}
        self.offsets = OffsetsManager(rm, self._on_loaded, self._on_unloaded)
        self.ops = GroupOffsets(rm, self.groups, self.offsets)
        rm.leadership_listeners.append(self.offsets.on_leadership)
        rm.appends.marker_listeners.append(self.offsets.on_markers)
        rm.metadata.deleted_listeners.append(self.ops.on_partitions_deleted)
        self._joins: dict[str, dict[str, asyncio.Future[JoinResult]]] = {}
        self._syncs: dict[str, dict[str, asyncio.Future[SyncAnswer]]] = {}
        self._deadlines: dict[str, asyncio.TimerHandle] = {}
        self._stored: dict[str, int] = {}  # each group's generation in its last record
        self._tasks: set[asyncio.Task[Any]] = set()

    def start(self) -> None:
        self._spawn(self._expire_sessions())
        self._spawn(self.ops.expire_offsets_forever())

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for timer in self._deadlines.values():
            timer.cancel()
        await self.offsets.stop()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # ---- where groups are --------------------------------------------------------------------

    def coordinator_of(self, group_id: str, listener: str) -> int | None:
        """The leader of the group's partition of __consumer_offsets, if it has `listener`."""
        tp = TopicPartition(OFFSETS_TOPIC, self.offsets.partition_of(group_id))
        state = self.rm.metadata.partitions.get(tp)
        broker = None if state is None else self.rm.metadata.brokers.get(state.leader)
        return None if broker is None or not broker.endpoint_for(listener) else broker.broker_id

    async def find(self, group_id: str, listener: str) -> int | None:
        """FindCoordinator: the coordinator's broker id; None (COORDINATOR_NOT_AVAILABLE)
        while there is none, the topic created on first use (KafkaApis.createInternalTopic)."""
        node = self.coordinator_of(group_id, listener)
        if node is None and OFFSETS_TOPIC not in self.rm.metadata.topics():
            await self.ops.create_offsets_topic()
        return node

    def check_group(self, group_id: str, listener: str = "") -> ErrorCode:
        """Whether this broker serves `group_id` now (the error to answer otherwise)."""
        if not valid_group_id(group_id):
            return ErrorCode.INVALID_GROUP_ID
        state = self.offsets.state(group_id)
        if state is ErrorCode.NOT_COORDINATOR and OFFSETS_TOPIC not in self.rm.metadata.topics():
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return state

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.initial_delay_ms)
        return group

    # ---- a partition of __consumer_offsets loaded or given up ---------------------------

    def _on_loaded(self, partition: int) -> None:
        log = self.offsets.loaded[partition]
        now = self.rm.now_ms()
        for group_id, value in log.groups.items():
            if self.offsets.partition_of(group_id) == partition:
                self.groups[group_id] = loaded_group(group_id, value, now, self.initial_delay_ms)
                self._stored[group_id] = value.generation
        self._spawn(self.ops.migrate_from_zookeeper(partition))

    def _on_unloaded(self, partition: int) -> None:
        for group_id in [g for g in self.groups if self.offsets.partition_of(g) == partition]:
            del self.groups[group_id]
            self._stored.pop(group_id, None)
            for future in self._joins.pop(group_id, {}).values():
                _answer(future, JoinResult(ErrorCode.NOT_COORDINATOR, ""))
            for sync in self._syncs.pop(group_id, {}).values():
                _answer(sync, (ErrorCode.NOT_COORDINATOR, b""))
            timer = self._deadlines.pop(group_id, None)
            if timer is not None:
                timer.cancel()

    # ---- JoinGroup, SyncGroup ------------------------------------------------------------------

    async def join(
        self,
        group_id: str,
        member_id: str,
        *,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
    ) -> JoinResult:
        if not self.min_session_ms <= session_timeout_ms <= self.max_session_ms:
            return JoinResult(ErrorCode.INVALID_SESSION_TIMEOUT, member_id)
        group = self._group(group_id)
        error = group.check_join(member_id, protocol_type, protocols)
        if error is not ErrorCode.NONE:
            return JoinResult(error, member_id)
        if not member_id:
            member_id = f"{client_id or 'member'}-{uuid.uuid4()}"
            if require_known_member_id:  # KIP-394: the client joins again with this id
                group.add_pending(member_id, session_timeout_ms, self.rm.now_ms())
                return JoinResult(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        now = self.rm.now_ms()
        member = Member(
            member_id, client_id, client_host, session_timeout_ms,
            max(rebalance_timeout_ms, session_timeout_ms), protocols, now,
        )  # fmt: skip
        answer = group.join(member, protocol_type, now)
        if answer is not None:
            return answer
        waiting = self._joins.setdefault(group_id, {})
        old = waiting.pop(member_id, None)
        if old is not None and not old.done():  # the same member joined again meanwhile
            old.set_result(JoinResult(ErrorCode.REBALANCE_IN_PROGRESS, member_id))
        future: asyncio.Future[JoinResult] = asyncio.get_running_loop().create_future()
        waiting[member_id] = future
        self._after_change(group)
        return await future

    async def sync(
        self, group_id: str, member_id: str, generation_id: int, assignments: dict[str, bytes]
    ) -> SyncAnswer:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID, b""
        storing = group.proposed is not None
        answer = group.sync(member_id, generation_id, assignments, self.rm.now_ms())
        if answer is not None:
            self._after_change(group)
            return answer
        future: asyncio.Future[SyncAnswer] = asyncio.get_running_loop().create_future()
        self._syncs.setdefault(group_id, {})[member_id] = future
        if group.proposed is not None and not storing:  # the leader's: store, then answer
            self._spawn(self._store_assignment(group, group.generation_id, group.proposed))
        return await future

    async def _store_assignment(
        self, group: Group, generation: int, assignments: dict[str, bytes]
    ) -> None:
        """GroupMetadataManager.storeGroup, then the generation settles (or rebalances)."""
        value = group_value(group, assignments, wall_clock_ms())
        error = group_store_error(await self.offsets.store_group(group.group_id, value))
        if self.groups.get(group.group_id) is not group:
            return  # unloaded meanwhile: its members were told NOT_COORDINATOR
        if group.complete_sync(generation, error, self.rm.now_ms()):
            if error is ErrorCode.NONE:
                self._stored[group.group_id] = generation
            else:
                for sync in self._syncs.pop(group.group_id, {}).values():
                    _answer(sync, (error, b""))
        self._after_change(group)

    async def _store_empty(self, group: Group, generation: int) -> None:
        """A group that became empty: its record says so (and when, for offset expiry)."""
        error = await self.offsets.store_group(
            group.group_id, group_value(group, {}, wall_clock_ms())
        )
        if error is ErrorCode.NONE and self.groups.get(group.group_id) is group:
            self._stored[group.group_id] = generation

    # ---- Heartbeat, LeaveGroup -----------------------------------------------------------------

    def heartbeat(self, group_id: str, member_id: str, generation_id: int) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        return group.heartbeat(member_id, generation_id, self.rm.now_ms())

    def leave(self, group_id: str, member_ids: Iterable[str]) -> list[ErrorCode]:
        group = self.groups.get(group_id)
        if group is None:
            return [ErrorCode.UNKNOWN_MEMBER_ID for _ in member_ids]
        now = self.rm.now_ms()
        errors = [group.leave(m, now) for m in member_ids]
        self._after_change(group)
        return errors

    def check_commit(self, group_id: str, member_id: str, generation_id: int) -> ErrorCode:
        return self._group(group_id).check_commit(member_id, generation_id)

    def check_txn_commit(self, group_id: str, member_id: str, generation_id: int) -> ErrorCode:
        return self._group(group_id).check_txn_commit(member_id, generation_id)

    # ---- what waits: answered after every change ----------------------------------------------

    def _after_change(self, group: Group) -> None:
        gid = group.group_id
        joins, syncs = self._joins.get(gid, {}), self._syncs.get(gid, {})
        # A member removed (left, expired, dropped by the rebalance) while its join waited is
        # answered UNKNOWN_MEMBER_ID: removeMemberAndUpdateGroup's maybeInvokeJoinCallback.
        for member_id in [m for m in joins if m not in group.members]:
            _answer(joins.pop(member_id), JoinResult(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        for member_id in list(syncs):
            m = group.members.get(member_id)
            if m is None:
                _answer(syncs.pop(member_id), (ErrorCode.UNKNOWN_MEMBER_ID, b""))
            elif group.state is GroupState.PREPARING_REBALANCE:
                _answer(syncs.pop(member_id), (ErrorCode.REBALANCE_IN_PROGRESS, b""))
            elif group.state is GroupState.STABLE:
                _answer(syncs.pop(member_id), (ErrorCode.NONE, m.assignment))
        now = self.rm.now_ms()
        if group.rejoin_complete(now):
            for result in group.complete_join(now):
                future = joins.pop(result.member_id, None)
                if future is not None:
                    _answer(future, result)
            slog.event(
                "group_rebalanced", group=gid, generation=group.generation_id,
                members=len(group.members), leader=group.leader_id, protocol=group.protocol_name,
            )  # fmt: skip
        if group.state is GroupState.EMPTY and self._stored.get(gid, 0) != group.generation_id:
            self._stored[gid] = group.generation_id
            self._spawn(self._store_empty(group, group.generation_id))
        self._arm_deadline(group, now)

    def _arm_deadline(self, group: Group, now_ms: int) -> None:
        gid = group.group_id
        timer = self._deadlines.pop(gid, None)
        if timer is not None:
            timer.cancel()
        if group.state is GroupState.PREPARING_REBALANCE and group.rebalance_deadline_ms:
            delay_s = max(0, group.rebalance_deadline_ms - now_ms) / 1000
            loop = asyncio.get_running_loop()
            self._deadlines[gid] = loop.call_later(delay_s, self._after_change, group)

    async def _expire_sessions(self) -> None:
        while True:
            await asyncio.sleep(EXPIRY_CHECK_S)
            now = self.rm.now_ms()
            for group in list(self.groups.values()):
                try:
                    gone = group.expire(now)
                    if gone:
                        slog.event("group_members_expired", group=group.group_id, members=gone)
                        self._after_change(group)
                except Exception as exc:  # a periodic task must survive one bad group
                    slog.event("task_failed", logging.ERROR, task="group_expiry", error=repr(exc))


def _answer(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)
