"""The group coordinator of one broker, on its event loop: the groups this broker coordinates
(group.py decides), the JoinGroup and SyncGroup answers that wait, the rebalance deadlines and
the session expiry, and committed offsets (offsets.py). Group membership lives in memory, as
in Kafka; when the coordinator moves (the live brokers change) the members find the new one,
which does not know them, and join again. Committed offsets are in ZooKeeper and survive it."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Iterable
from typing import Any

from broker.groups.group import Group, GroupState, JoinResult, Member
from broker.groups.offsets import OffsetStore
from broker.groups.placement import coordinator_for
from broker.replica_manager import ReplicaManager
from minibroker.core.errors import ErrorCode
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
        self.offsets = OffsetStore(rm.store)
        self.groups: dict[str, Group] = {}
        self._joins: dict[str, dict[str, asyncio.Future[JoinResult]]] = {}
        self._syncs: dict[str, dict[str, asyncio.Future[SyncAnswer]]] = {}
        self._deadlines: dict[str, asyncio.TimerHandle] = {}
        self._expiry: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._expiry = asyncio.ensure_future(self._expire_sessions())

    async def stop(self) -> None:
        if self._expiry is not None:
            self._expiry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._expiry
        for timer in self._deadlines.values():
            timer.cancel()

    # ---- where groups are --------------------------------------------------------------------

    def coordinator_of(self, group_id: str, listener: str) -> int | None:
        live = [b.broker_id for b in self.rm.metadata.brokers.values() if b.endpoint_for(listener)]
        return coordinator_for(group_id, live)

    def check_group(self, group_id: str, listener: str) -> ErrorCode:
        """Whether this broker serves `group_id` now (the error to answer otherwise)."""
        if not valid_group_id(group_id):
            return ErrorCode.INVALID_GROUP_ID
        coordinator = self.coordinator_of(group_id, listener)
        if coordinator is None:
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        return ErrorCode.NONE if coordinator == self.rm.broker_id else ErrorCode.NOT_COORDINATOR

    def _group(self, group_id: str) -> Group:
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = Group(group_id, self.initial_delay_ms)
        return group

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
                group.add_pending(member_id)
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
        answer = group.sync(member_id, generation_id, assignments, self.rm.now_ms())
        if answer is not None:
            self._after_change(group)
            return answer
        future: asyncio.Future[SyncAnswer] = asyncio.get_running_loop().create_future()
        self._syncs.setdefault(group_id, {})[member_id] = future
        return await future

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

    # ---- ListGroups, DescribeGroups, DeleteGroups (the admin clients' group tools) -------------

    async def list_groups(self, listener: str) -> list[tuple[str, str, str]]:
        """The groups this broker coordinates: (group id, protocol type, state) of those in
        memory and of those that only have committed offsets (Empty, "consumer"), as Kafka's
        coordinator lists what it loaded from its offsets partitions."""
        mine = {
            g: (g, group.protocol_type or "", group.state.value)
            for g, group in self.groups.items()
            if group.members or group.state is not GroupState.EMPTY
        }
        for g in await self.offsets.groups():
            if g not in mine and self.check_group(g, listener) is ErrorCode.NONE:
                mine[g] = (g, "consumer", GroupState.EMPTY.value)
        return [
            entry
            for g, entry in sorted(mine.items())
            if self.check_group(g, listener) is ErrorCode.NONE
        ]

    async def describe(self, group_id: str) -> tuple[str, Group | None]:
        """The group's state name and, when it has members, the group; "Dead" when the group is
        unknown here (Kafka's describe of a group it has no metadata for)."""
        group = self.groups.get(group_id)
        if group is not None and (group.members or group.state is not GroupState.EMPTY):
            return group.state.value, group
        if await self.offsets.has_offsets(group_id):
            return GroupState.EMPTY.value, None
        return "Dead", None

    async def delete(self, group_id: str) -> ErrorCode:
        """GroupCoordinator.handleDeleteGroups: only an empty group, with its offsets."""
        state, group = await self.describe(group_id)
        if state == "Dead":
            return ErrorCode.GROUP_ID_NOT_FOUND
        if group is not None and group.members:
            return ErrorCode.NON_EMPTY_GROUP
        self.groups.pop(group_id, None)
        await self.offsets.delete_group(group_id)
        slog.event("group_deleted", group=group_id)
        return ErrorCode.NONE

    # ---- what waits: answered after every change ----------------------------------------------

    def _after_change(self, group: Group) -> None:
        gid = group.group_id
        joins, syncs = self._joins.get(gid, {}), self._syncs.get(gid, {})
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
            for result in group.complete_join():
                future = joins.pop(result.member_id, None)
                if future is not None:
                    _answer(future, result)
            slog.event(
                "group_rebalanced", group=gid, generation=group.generation_id,
                members=len(group.members), leader=group.leader_id, protocol=group.protocol_name,
            )  # fmt: skip
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
