"""One consumer group's membership rules (Kafka 2.6's GroupMetadata and GroupCoordinator),
pure: every method takes `now_ms` and returns what to answer; the coordinator (coordinator.py)
holds the waiting requests and the timers.

Theory of operation. A group is Empty (no members), PreparingRebalance (members are (re)joining;
JoinGroup answers wait), CompletingRebalance (a generation was formed; SyncGroup answers wait
for the leader's assignment) or Stable. A join of a new member, a changed member, the leader, a
member leaving or expiring moves the group to PreparingRebalance. The rebalance completes when
every member joined again, or at its deadline (the largest rebalance timeout; a group that was
empty waits `group.initial.rebalance.delay.ms` first, to gather its first members): members
that did not rejoin are removed, the generation grows, the protocol every member supports that
most members list first is chosen, and the leader (kept if still a member, else the first to
join) receives every member's metadata. The leader's SyncGroup assignment is stored in
__consumer_offsets before the generation settles (complete_sync).

Expiry, as Kafka's heartbeat purgatory: a member's session runs from its last heartbeat, from
its join's answer and from its SyncGroup's answer; silent past it, the member is removed (and
the coordinator answers a join it left waiting UNKNOWN_MEMBER_ID, as removeMemberAndUpdateGroup
does), unless a JoinGroup or SyncGroup of its own is waiting for an answer (it cannot heartbeat
then). A new member is the exception: until its first join is answered it has
NEW_MEMBER_JOIN_TIMEOUT_MS, however long the rebalance. An id handed out with MEMBER_ID_REQUIRED
(KIP-394) is pending until it joins, leaves, or its session timeout passes; a rebalance waits
for the pending ids as for the members (hasAllMembersJoined).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from enum import Enum

from minibroker.core.errors import ErrorCode

# GroupCoordinator.NewMemberJoinTimeoutMs: how long a new member's first join may wait.
NEW_MEMBER_JOIN_TIMEOUT_MS = 5 * 60 * 1000


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"


@dataclass
class Member:
    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: list[tuple[str, bytes]]
    last_heartbeat_ms: int
    assignment: bytes = b""
    awaiting_join: bool = False
    awaiting_sync: bool = False  # its SyncGroup waits for the leader's assignment
    is_new: bool = False  # joined, its first join not answered yet (MemberMetadata.isNew)

    def metadata(self, protocol: str) -> bytes:
        return next(m for name, m in self.protocols if name == protocol)


@dataclass(frozen=True)
class JoinResult:
    """A JoinGroup answer: the member's generation, the group's protocol and leader; the leader
    alone gets every member's metadata (member id, metadata)."""

    error: ErrorCode
    member_id: str
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()


@dataclass
class Group:
    group_id: str
    initial_rebalance_delay_ms: int
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)  # in join order
    # Member ids handed out with MEMBER_ID_REQUIRED, not joined yet (KIP-394), and when each
    # expires (its session timeout after it was handed out).
    pending: dict[str, int] = field(default_factory=dict)
    rebalance_deadline_ms: int | None = None
    # An empty group's first rebalance: wait out group.initial.rebalance.delay.ms for members.
    gathering: bool = False
    # The leader's assignment while it is being stored (SyncGroup answers wait for that).
    proposed: dict[str, bytes] | None = None

    # ---- JoinGroup -------------------------------------------------------------------------

    def check_join(
        self, member_id: str, protocol_type: str, protocols: list[tuple[str, bytes]]
    ) -> ErrorCode:
        """A join's errors, before anything changes."""
        if not protocols or not protocol_type:
            return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        if member_id and member_id not in self.members and member_id not in self.pending:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if self.state is not GroupState.EMPTY or self.members:
            if protocol_type != self.protocol_type:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            common = {n for n, _ in protocols}
            for m in self.members.values():
                if m.member_id != member_id:
                    common &= {n for n, _ in m.protocols}
            if not common:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
        return ErrorCode.NONE

    def add_pending(self, member_id: str, session_timeout_ms: int, now_ms: int) -> None:
        self.pending[member_id] = now_ms + session_timeout_ms

    def join(self, member: Member, protocol_type: str, now_ms: int) -> JoinResult | None:
        """A (re)join of a checked member: the answer now (a follower whose protocols did not
        change, in a formed generation), or None: it waits for the rebalance to complete."""
        self.pending.pop(member.member_id, None)
        old = self.members.get(member.member_id)
        if (
            old is not None
            and self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
            and member.member_id != self.leader_id
            and old.protocols == member.protocols
        ):
            old.last_heartbeat_ms = now_ms
            return self._join_result(old, with_members=False)
        if old is not None:
            member.assignment = old.assignment
            member.is_new = old.is_new
            if old.is_new:  # its first join's time limit runs on (updateMemberAndRebalance)
                member.last_heartbeat_ms = old.last_heartbeat_ms
        else:
            member.is_new = True  # addMemberAndRebalance
        member.awaiting_join = True
        if self.state is GroupState.EMPTY and not self.members:
            self.protocol_type = protocol_type
        self.members[member.member_id] = member
        self._prepare_rebalance(now_ms)
        return None

    def rejoin_complete(self, now_ms: int) -> bool:
        """Whether the rebalance under way can complete now: every member has rejoined and no
        pending member id is still to join (and an empty group's first wait is over), or its
        deadline passed."""
        if self.state is not GroupState.PREPARING_REBALANCE or self.rebalance_deadline_ms is None:
            return False
        if now_ms >= self.rebalance_deadline_ms:
            return True
        joined = all(m.awaiting_join for m in self.members.values())
        return not self.gathering and not self.pending and joined

    def complete_join(self, now_ms: int) -> list[JoinResult]:
        """Form the next generation: drop members that did not rejoin; the answers to every
        waiting join (empty when no member is left). Each member's session starts again
        (onCompleteJoin's completeAndScheduleNextHeartbeatExpiration)."""
        for member_id in [m.member_id for m in self.members.values() if not m.awaiting_join]:
            del self.members[member_id]
        self.rebalance_deadline_ms = None
        self.gathering = False
        self.generation_id += 1
        if not self.members:
            self.state, self.protocol_name, self.leader_id = GroupState.EMPTY, None, None
            return []
        self.protocol_name = self._vote()
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.state = GroupState.COMPLETING_REBALANCE
        results = []
        for m in self.members.values():
            m.awaiting_join, m.awaiting_sync, m.is_new = False, False, False
            m.last_heartbeat_ms = now_ms
            m.assignment = b""
            results.append(self._join_result(m, with_members=m.member_id == self.leader_id))
        return results

    def _join_result(self, member: Member, *, with_members: bool) -> JoinResult:
        assert self.protocol_name is not None and self.leader_id is not None
        members = (
            tuple((m.member_id, m.metadata(self.protocol_name)) for m in self.members.values())
            if with_members
            else ()
        )
        return JoinResult(
            ErrorCode.NONE, member.member_id, self.generation_id, self.protocol_type,
            self.protocol_name, self.leader_id, members,
        )  # fmt: skip

    def _vote(self) -> str:
        """The protocol every member supports that most of them list first (Kafka's vote:
        each member votes for its most preferred candidate)."""
        members = list(self.members.values())
        candidates = {n for n, _ in members[0].protocols}
        for m in members[1:]:
            candidates &= {n for n, _ in m.protocols}
        votes = Counter(next(n for n, _ in m.protocols if n in candidates) for m in members)
        first = [n for n, _ in members[0].protocols if n in candidates]
        return max(first, key=lambda n: votes[n])  # ties: the first member's order

    # ---- SyncGroup -------------------------------------------------------------------------

    def check_member(self, member_id: str, generation_id: int) -> ErrorCode:
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def sync(
        self, member_id: str, generation_id: int, assignments: dict[str, bytes], now_ms: int
    ) -> tuple[ErrorCode, bytes] | None:
        """A SyncGroup: (error, assignment) now, or None: it waits for the leader's. The
        leader's sync settles the generation: every member's `assignment` is then its answer."""
        error = self.check_member(member_id, generation_id)
        if error is not ErrorCode.NONE:
            return error, b""
        member = self.members[member_id]
        member.last_heartbeat_ms = now_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS, b""
        if self.state is GroupState.STABLE:
            return ErrorCode.NONE, member.assignment
        if member_id == self.leader_id and self.proposed is None:
            self.proposed = dict(assignments)  # stored first, then settled (complete_sync)
        member.awaiting_sync = True
        return None

    def complete_sync(self, generation_id: int, error: ErrorCode, now_ms: int) -> bool:
        """The leader's assignment was stored in __consumer_offsets (or failed to be: `error`),
        Kafka's storeGroup callback: the generation settles (Stable, each member's assignment
        its answer), or its assignment is dropped and the group rebalances. False when the
        group moved on meanwhile (another generation): nothing changes."""
        proposed, self.proposed = self.proposed, None
        if (
            proposed is None
            or self.state is not GroupState.COMPLETING_REBALANCE
            or generation_id != self.generation_id
        ):
            return False
        for m in self.members.values():
            m.assignment = proposed.get(m.member_id, b"") if error is ErrorCode.NONE else b""
        if error is ErrorCode.NONE:
            self._answer_syncs(now_ms)
            self.state = GroupState.STABLE
        else:
            self._prepare_rebalance(now_ms)
        return True

    def _answer_syncs(self, now_ms: int) -> None:
        """The waiting SyncGroups are answered (propagateAssignment): their members' sessions
        start again from now."""
        for m in self.members.values():
            if m.awaiting_sync:
                m.awaiting_sync, m.last_heartbeat_ms = False, now_ms

    # ---- Heartbeat, LeaveGroup, expiry ----------------------------------------------------

    def heartbeat(self, member_id: str, generation_id: int, now_ms: int) -> ErrorCode:
        """GroupCoordinator.handleHeartbeat: only a member of the current generation keeps
        its session."""
        error = self.check_member(member_id, generation_id)
        if error is not ErrorCode.NONE:
            return error
        if self.state is GroupState.EMPTY:
            return ErrorCode.UNKNOWN_MEMBER_ID
        # A formed generation's members heartbeat before their sync answer: that is normal.
        self.members[member_id].last_heartbeat_ms = now_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE

    def leave(self, member_id: str, now_ms: int) -> ErrorCode:
        """handleLeaveGroup: a pending member id is forgotten (removePendingMemberAndUpdateGroup),
        a member removed (its waiting join is the coordinator's to answer)."""
        if self.pending.pop(member_id, None) is not None:
            return ErrorCode.NONE
        if member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        self._remove(member_id, now_ms)
        return ErrorCode.NONE

    def expire(self, now_ms: int) -> list[str]:
        """Kafka's onExpireHeartbeat at `now_ms`: the members whose session (a new member's
        NEW_MEMBER_JOIN_TIMEOUT_MS) passed without a heartbeat and who have no join or sync
        of their own waiting (a new member's waiting join does not save it), removed; and the
        pending member ids past their session timeout, forgotten. Returns the ids removed."""
        gone = [
            m.member_id
            for m in self.members.values()
            if now_ms - m.last_heartbeat_ms
            > (NEW_MEMBER_JOIN_TIMEOUT_MS if m.is_new else m.session_timeout_ms)
            and (m.is_new or not (m.awaiting_join or m.awaiting_sync))
        ]
        for member_id in gone:
            self._remove(member_id, now_ms)
        lapsed = [p for p, deadline in self.pending.items() if now_ms > deadline]
        for member_id in lapsed:
            del self.pending[member_id]
        return gone + lapsed

    def _remove(self, member_id: str, now_ms: int) -> None:
        del self.members[member_id]
        if not self.members and self.state is not GroupState.PREPARING_REBALANCE:
            self.state, self.protocol_name, self.leader_id = GroupState.EMPTY, None, None
            self.generation_id += 1
            return
        self._prepare_rebalance(now_ms)

    def _prepare_rebalance(self, now_ms: int) -> None:
        if self.state is GroupState.PREPARING_REBALANCE:
            return
        self.proposed = None
        was_empty = self.state is GroupState.EMPTY
        self.state = GroupState.PREPARING_REBALANCE
        self._answer_syncs(now_ms)  # REBALANCE_IN_PROGRESS (resetAndPropagateAssignmentError)
        timeout = max((m.rebalance_timeout_ms for m in self.members.values()), default=0)
        if was_empty:
            self.gathering = True
            timeout = min(timeout, self.initial_rebalance_delay_ms)
        self.rebalance_deadline_ms = now_ms + timeout

    # ---- offsets ---------------------------------------------------------------------------

    def check_txn_commit(self, member_id: str, generation_id: int) -> ErrorCode:
        """TxnOffsetCommit (GroupCoordinator.doTxnCommitOffsets): the member and generation
        are checked only when the request names them, and a rebalance does not refuse it."""
        if member_id and member_id not in self.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != self.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def check_commit(self, member_id: str, generation_id: int) -> ErrorCode:
        """Whether a member may commit offsets now (Kafka: anyone while the group is empty and
        the commit names no generation; else a current member of the current generation, not
        while its generation waits for the leader's assignment)."""
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return ErrorCode.NONE
        error = self.check_member(member_id, generation_id)
        if error is not ErrorCode.NONE:
            return error
        if self.state is GroupState.COMPLETING_REBALANCE:
            return ErrorCode.REBALANCE_IN_PROGRESS
        return ErrorCode.NONE
