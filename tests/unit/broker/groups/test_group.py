"""A consumer group's rules (Kafka 2.6's GroupCoordinator, core/src/main/scala/kafka/coordinator/
group/GroupCoordinator.scala, and its GroupCoordinatorTest), time as an argument: joins gather
into generations, the leader's assignment settles them, heartbeats, leaves and silences start
the next rebalance, and commits are checked against the generation."""

from __future__ import annotations

import pytest

from broker.groups.group import NEW_MEMBER_JOIN_TIMEOUT_MS, Group, GroupState, Member
from minibroker.core.coordinator_log.partitioning import java_string_hash
from minibroker.core.errors import ErrorCode

DELAY = 300
SESSION = 10_000
REBALANCE = 20_000


def member(member_id: str, now: int, protocols: list[str] | None = None) -> Member:
    names = protocols or ["range", "roundrobin"]
    return Member(member_id, "client", "host", SESSION, REBALANCE,
                  [(n, f"{member_id}:{n}".encode()) for n in names], now)  # fmt: skip


def formed(*ids: str) -> Group:
    """A group whose members joined at 0 and whose first generation formed after the delay."""
    g = Group("g", DELAY)
    for m in ids:
        assert g.check_join("", "consumer", member(m, 0).protocols) is ErrorCode.NONE
        assert g.join(member(m, 0), "consumer", 0) is None
    assert not g.rejoin_complete(DELAY - 1)  # an empty group gathers its first members
    assert g.rejoin_complete(DELAY)
    g.complete_join(DELAY)
    return g


def test_the_first_generation_forms_after_the_initial_delay_and_the_leader_gets_all() -> None:
    g = Group("g", DELAY)
    g.join(member("a", 0), "consumer", 0)
    g.join(member("b", 10), "consumer", 10)
    assert g.rejoin_complete(DELAY)
    results = {r.member_id: r for r in g.complete_join(DELAY)}
    assert g.state is GroupState.COMPLETING_REBALANCE and g.generation_id == 1
    assert results["a"].leader_id == "a" and results["a"].protocol_name == "range"
    assert [m for m, _ in results["a"].members] == ["a", "b"]
    assert results["b"].members == () and results["b"].generation_id == 1


def settle(g: Group, assignments: dict[str, bytes], now: int = DELAY) -> None:
    """The leader's sync, and its assignment stored."""
    assert g.sync(g.leader_id or "", g.generation_id, assignments, now) is None
    assert g.complete_sync(g.generation_id, ErrorCode.NONE, now)


def test_the_leaders_sync_settles_the_generation_and_followers_get_their_part() -> None:
    g = formed("a", "b")
    assert g.sync("b", 1, {}, DELAY) is None  # waits for the leader
    assert g.sync("a", 1, {"a": b"A", "b": b"B"}, DELAY) is None  # waits for the store
    assert g.state is GroupState.COMPLETING_REBALANCE
    assert g.complete_sync(1, ErrorCode.NONE, DELAY)
    assert g.state.value == "Stable" and g.members["b"].assignment == b"B"
    assert g.sync("b", 1, {}, DELAY) == (ErrorCode.NONE, b"B")
    assert g.sync("a", 1, {}, DELAY) == (ErrorCode.NONE, b"A")


def test_an_assignment_that_is_not_stored_starts_a_rebalance() -> None:
    """storeGroup failing (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE...): Kafka's
    resetAndPropagateAssignmentError and maybePrepareRebalance."""
    g = formed("a", "b")
    assert g.sync("a", 1, {"a": b"A", "b": b"B"}, DELAY) is None
    assert g.complete_sync(1, ErrorCode.NOT_COORDINATOR, DELAY)
    assert g.state is GroupState.PREPARING_REBALANCE and g.members["b"].assignment == b""
    assert not g.complete_sync(1, ErrorCode.NONE, DELAY)  # nothing proposed any more


def test_a_store_completing_after_the_group_moved_on_changes_nothing() -> None:
    g = formed("a", "b")
    assert g.sync("a", 1, {"a": b"A", "b": b"B"}, DELAY) is None
    g.leave("b", DELAY + 1)  # a rebalance starts while the assignment is stored
    assert not g.complete_sync(1, ErrorCode.NONE, DELAY + 2)
    assert g.state is GroupState.PREPARING_REBALANCE


def test_heartbeats_answer_by_member_generation_and_state() -> None:
    g = formed("a", "b")
    assert g.heartbeat("nobody", 1, DELAY) is ErrorCode.UNKNOWN_MEMBER_ID
    assert g.heartbeat("a", 0, DELAY) is ErrorCode.ILLEGAL_GENERATION
    assert g.heartbeat("a", 1, DELAY) is ErrorCode.NONE  # awaiting the sync is fine
    settle(g, {"a": b"A", "b": b"B"})
    assert g.heartbeat("b", 1, DELAY) is ErrorCode.NONE
    assert g.leave("b", DELAY + 1) is ErrorCode.NONE
    assert g.state is GroupState.PREPARING_REBALANCE
    assert g.heartbeat("a", 1, DELAY + 2) is ErrorCode.REBALANCE_IN_PROGRESS


def test_a_rebalance_completes_once_every_member_rejoined_or_at_its_deadline() -> None:
    g = formed("a", "b")
    settle(g, {"a": b"A", "b": b"B"})
    g.join(member("c", 1000), "consumer", 1000)  # a new member: everyone must rejoin
    assert g.state is GroupState.PREPARING_REBALANCE and not g.rejoin_complete(1001)
    g.join(member("a", 1002), "consumer", 1002)
    assert not g.rejoin_complete(1003)  # b has not rejoined
    assert g.rejoin_complete(1000 + REBALANCE)  # ... and never does
    results = g.complete_join(1000 + REBALANCE)
    assert sorted(r.member_id for r in results) == ["a", "c"] and "b" not in g.members
    assert g.generation_id == 2 and g.leader_id == "a"


def test_a_follower_rejoining_unchanged_in_a_stable_group_gets_its_generation_back() -> None:
    g = formed("a", "b")
    settle(g, {"a": b"A", "b": b"B"})
    again = g.join(member("b", 2000), "consumer", 2000)
    assert again is not None and again.generation_id == 1 and g.state is GroupState.STABLE


def test_silent_members_expire_but_not_while_their_own_sync_waits() -> None:
    """A SyncGroup waiting for the leader's assignment keeps its member (hasSatisfiedHeartbeat:
    isAwaitingSync); the answer starts its session again (propagateAssignment)."""
    g = formed("a", "b")
    assert g.sync("b", 1, {}, DELAY + 5) is None  # b waits for the leader's assignment
    assert g.sync("a", 1, {"a": b"A", "b": b"B"}, DELAY + 5) is None  # a's waits for the store
    assert g.expire(DELAY + SESSION + 100) == []
    assert g.complete_sync(1, ErrorCode.NONE, DELAY + SESSION + 100)
    g.heartbeat("a", 1, DELAY + 2 * SESSION)
    assert g.expire(DELAY + 2 * SESSION + 101) == ["b"]
    assert g.state is GroupState.PREPARING_REBALANCE


def test_a_member_that_never_syncs_expires_and_the_group_empties() -> None:
    """The issue-38 client: it joined and went away before its SyncGroup. Its session runs from
    its join's answer (onCompleteJoin's completeAndScheduleNextHeartbeatExpiration), so the
    group does not stay CompletingRebalance for ever with a member that is gone."""
    g = formed("a", "b")
    assert g.state.value == "CompletingRebalance"
    assert g.sync("b", 1, {}, DELAY + 5) is None  # b waits for the leader, who is gone
    assert g.expire(DELAY + SESSION) == []
    assert g.expire(DELAY + SESSION + 1) == ["a"]
    assert g.state is GroupState.PREPARING_REBALANCE  # b is told to rejoin; it does not
    assert g.expire(DELAY + 2 * SESSION + 6) == ["b"]
    assert (g.state, g.members, g.generation_id) == (GroupState.PREPARING_REBALANCE, {}, 1)
    assert g.rejoin_complete(DELAY + 2 * SESSION + 6)
    assert g.complete_join(DELAY + 2 * SESSION + 6) == []
    assert (g.state, g.generation_id) == (GroupState.EMPTY, 2)


def test_a_new_members_join_expires_after_the_new_member_join_timeout() -> None:
    """GroupCoordinatorTest.testNewMemberJoinExpiration: a rebalance waits for a member with
    long timeouts; the new member's join gives up at NewMemberJoinTimeoutMs (the coordinator
    answers it UNKNOWN_MEMBER_ID), while the old member, waiting for its own join, stays."""
    g = Group("g", DELAY)
    slow = Member("a", "c", "h", NEW_MEMBER_JOIN_TIMEOUT_MS + 5000,
                  NEW_MEMBER_JOIN_TIMEOUT_MS * 2, [("range", b"")], 0)  # fmt: skip
    g.join(slow, "consumer", 0)
    g.complete_join(DELAY)
    settle(g, {"a": b"A"})
    g.join(member("b", 1000), "consumer", 1000)  # waits for a to rejoin
    assert g.members["b"].is_new and g.expire(1000 + NEW_MEMBER_JOIN_TIMEOUT_MS) == []
    again = Member("a", "c", "h", slow.session_timeout_ms, slow.rebalance_timeout_ms,
                   slow.protocols, 1000 + NEW_MEMBER_JOIN_TIMEOUT_MS)  # fmt: skip
    g.join(again, "consumer", 1000 + NEW_MEMBER_JOIN_TIMEOUT_MS)  # a rejoins; b still waits
    assert g.expire(1000 + NEW_MEMBER_JOIN_TIMEOUT_MS + 1) == ["b"]
    assert list(g.members) == ["a"] and not g.members["a"].is_new
    assert g.rejoin_complete(1000 + NEW_MEMBER_JOIN_TIMEOUT_MS + 1)


def test_pending_member_ids_hold_the_rebalance_until_they_join_leave_or_expire() -> None:
    """KIP-394 in Kafka 2.6: hasAllMembersJoined needs no pending member ids;
    testJoinGroupCompletionWhenPendingMemberJoins / ...PendingMemberTimesOut and
    testPendingMembersLeavesGroup."""
    for ends in ("joins", "leaves", "expires"):
        g = formed("a")
        settle(g, {"a": b"A"})
        g.add_pending("p", 100, 1000)
        g.join(member("a", 1000), "consumer", 1000)  # the leader rejoins: a rebalance
        assert not g.rejoin_complete(1001), ends  # p is still to join
        if ends == "joins":
            g.join(member("p", 1002), "consumer", 1002)
        elif ends == "leaves":
            assert g.leave("p", 1002) is ErrorCode.NONE
            assert g.check_join("p", "consumer", member("p", 0).protocols) is (
                ErrorCode.UNKNOWN_MEMBER_ID
            )  # gone: it cannot join with that id any more
        else:
            assert g.expire(1100) == [] and g.expire(1101) == ["p"]
        assert not g.pending and g.rejoin_complete(1102), ends


def test_the_last_member_leaving_empties_the_group() -> None:
    g = formed("a")
    settle(g, {"a": b"A"})
    g.leave("a", DELAY)
    assert (g.state, g.leader_id, g.members) == (GroupState.EMPTY, None, {})


@pytest.mark.parametrize(
    ("existing", "joining", "protocol_type", "error"),
    [
        (["range"], ["range", "sticky"], "consumer", ErrorCode.NONE),
        (["range"], ["sticky"], "consumer", ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
        (["range"], ["range"], "connect", ErrorCode.INCONSISTENT_GROUP_PROTOCOL),
    ],
)
def test_a_join_must_share_the_groups_protocol_type_and_a_protocol(
    existing: list[str], joining: list[str], protocol_type: str, error: ErrorCode
) -> None:
    g = Group("g", DELAY)
    g.join(member("a", 0, existing), "consumer", 0)
    assert g.check_join("", protocol_type, member("b", 0, joining).protocols) is error


def test_an_unknown_member_id_cannot_join_but_one_handed_out_can() -> None:
    g = Group("g", DELAY)
    assert (
        g.check_join("made-up", "consumer", member("x", 0).protocols) is ErrorCode.UNKNOWN_MEMBER_ID
    )
    g.add_pending("given", SESSION, 0)
    assert g.check_join("given", "consumer", member("x", 0).protocols) is ErrorCode.NONE


def test_the_protocol_is_the_one_most_members_prefer_among_those_all_support() -> None:
    g = Group("g", DELAY)
    g.join(member("a", 0, ["roundrobin", "range"]), "consumer", 0)
    g.join(member("b", 0, ["range", "roundrobin"]), "consumer", 0)
    g.join(member("c", 0, ["range"]), "consumer", 0)
    g.complete_join(DELAY)
    assert g.protocol_name == "range"


def test_commits_need_the_current_generation_except_in_an_empty_group() -> None:
    g = Group("g", DELAY)
    assert (
        g.check_commit(
            "",
            -1,
        )
        is ErrorCode.NONE
    )  # offsets only: no membership
    g = formed("a")
    assert g.check_commit("a", 1) is ErrorCode.REBALANCE_IN_PROGRESS  # awaiting the assignment
    settle(g, {"a": b"A"})
    assert g.check_commit("a", 1) is ErrorCode.NONE
    assert g.check_commit("a", 0) is ErrorCode.ILLEGAL_GENERATION
    assert g.check_commit("", -1) is ErrorCode.UNKNOWN_MEMBER_ID


def test_javas_string_hash_and_kafkas_abs_place_groups() -> None:
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("") == 0
    assert java_string_hash("polygenelubricants") == -(1 << 31)  # Utils.abs(MIN_VALUE) == 0
    assert java_string_hash("\u00e9t\u00e9") == 227742  # UTF-16 code units, as Java
