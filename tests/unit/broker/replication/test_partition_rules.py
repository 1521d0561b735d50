"""The partition rules one at a time (reference §2), on plain offsets.

`Offsets` stands in for the local log: the rules only read its LEO, log start and epoch cache.
The end-to-end walk-throughs over real logs are in test_walkthroughs.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.replication.leader_epoch import LeaderEpochCache
from broker.replication.partition import Partition, PartitionState
from broker.replication.replica import RemoteReplica
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

TP = TopicPartition("t", 0)
LAG = 30_000


@dataclass
class Offsets:
    log_end_offset: int = 0
    log_start_offset: int = 0
    epoch_cache: LeaderEpochCache = field(default_factory=LeaderEpochCache)


def leader(
    isr: tuple[int, ...] = (1, 2, 3), leo: int = 0, now: int = 0, min_isr: int = 1
) -> tuple[Partition, Offsets]:
    log = Offsets(log_end_offset=leo)
    p = Partition(TP, local_broker_id=1, replica_lag_time_max_ms=LAG, min_insync_replicas=min_isr)
    p.make_leader(PartitionState(1, 0, isr, (1, 2, 3), zk_version=4, controller_epoch=1), log, now)
    return p, log


def fetch(p: Partition, follower: int, offset: int, now: int, leo: int) -> None:
    p.update_follower_fetch_state(
        follower,
        fetch_offset=offset,
        log_start_offset=0,
        fetch_time_ms=now,
        leader_end_offset=leo,
        local_leo=leo,
    )


# ---- lastCaughtUpTimeMs (§2.1) ----------------------------------------------------------------


def test_the_reference_worked_example_of_last_caught_up_time() -> None:
    r = RemoteReplica(2)
    r.update_fetch_state(100, 0, fetch_time_ms=0, leader_end_offset=100)
    assert r.last_caught_up_time_ms == 0
    # Producer appends 10 (leader LEO 110). At t=2 the follower fetches at 100 < 110, but it
    # has reached the leader's LEO of its previous fetch: caught up as of that fetch (t=0).
    r.update_fetch_state(100, 0, fetch_time_ms=2, leader_end_offset=110)
    assert r.last_caught_up_time_ms == 0
    # t=3: fetches at 110 while the LEO is 120: 110 >= 110, caught up as of t=2.
    r.update_fetch_state(110, 0, fetch_time_ms=3, leader_end_offset=120)
    assert r.last_caught_up_time_ms == 2


# ---- shrink timing (§2.4, §3.1, pitfalls 1, 2, 31) --------------------------------------------


def expiration_checks(p: Partition, log: Offsets, until: int) -> int | None:
    """Run the isr-expiration task every lag/2 from 0; the time the first shrink is proposed."""
    for now in range(0, until + 1, LAG // 2):
        proposal = p.maybe_shrink_isr(log.log_end_offset, now)
        if proposal is not None:
            return now
    return None


@pytest.mark.parametrize("stop_at", [0, 1, 7_500, 14_999, 15_000, 22_222])
def test_a_stopped_follower_leaves_the_isr_between_lag_and_one_and_a_half_lag(
    stop_at: int,
) -> None:
    p, log = leader(isr=(1, 2))
    log.log_end_offset = 10
    fetch(p, 2, 10, now=stop_at, leo=10)  # its last fetch: caught up at stop_at
    log.log_end_offset = 20  # then the producer writes on and the follower never fetches again
    shrunk_at = expiration_checks(p, log, until=200_000)
    assert shrunk_at is not None
    assert stop_at + LAG < shrunk_at <= stop_at + LAG * 3 // 2


def test_an_idle_follower_at_the_leaders_leo_never_leaves() -> None:
    p, log = leader(isr=(1, 2), leo=10)
    fetch(p, 2, 10, now=0, leo=10)
    assert expiration_checks(p, log, until=10 * LAG) is None


def test_a_follower_that_always_reaches_the_previous_fetch_leo_stays_under_constant_load() -> None:
    p, log = leader(isr=(1, 2))
    follower_offset = 0
    for now in range(0, 10 * LAG, 500):
        fetch(p, 2, follower_offset, now=now, leo=log.log_end_offset)
        follower_offset = log.log_end_offset  # it gets everything the leader had at this fetch
        log.log_end_offset += 10  # ...and the producer writes more right after
        assert p.maybe_shrink_isr(log.log_end_offset, now) is None
    assert p.isr == {1, 2}


def test_shrink_proposes_the_isr_without_the_laggard_at_the_cached_zk_version() -> None:
    p, log = leader(isr=(1, 2, 3), leo=5)
    fetch(p, 2, 5, now=0, leo=5)
    fetch(p, 3, 5, now=0, leo=5)
    log.log_end_offset = 9
    fetch(p, 2, 9, now=LAG + 1, leo=9)
    proposal = p.maybe_shrink_isr(9, now_ms=LAG + 1)
    assert proposal is not None
    assert proposal.kind == "shrink" and proposal.changed == {3}
    assert proposal.new_state.isr == (1, 2)
    assert proposal.new_state.leader_epoch == 0  # leader-driven changes keep the epoch
    assert proposal.new_state.controller_epoch == 1
    assert proposal.expected_zk_version == 4
    assert p.isr == {1, 2, 3}  # nothing changes before the write succeeded
    assert p.maybe_shrink_isr(9, now_ms=LAG + 2) is None  # one change in flight at a time


def test_a_failed_isr_write_leaves_the_isr_and_zk_version_unchanged() -> None:
    p, log = leader(isr=(1, 2), leo=5)
    fetch(p, 2, 0, now=0, leo=5)
    proposal = p.maybe_shrink_isr(5, now_ms=LAG + 1)
    assert proposal is not None
    assert not p.apply_isr_write(proposal, None, local_leo=5, now_ms=LAG + 1)
    assert (p.isr, p.zk_version) == (frozenset({1, 2}), 4)
    # It is proposed again on the next check, still with the stale version (§2.7).
    again = p.maybe_shrink_isr(5, now_ms=LAG + 2)
    assert again is not None and again.expected_zk_version == 4


def test_a_successful_shrink_can_advance_the_hw() -> None:
    p, log = leader(isr=(1, 2), leo=5)
    fetch(p, 2, 0, now=0, leo=5)
    assert p.high_watermark == 0
    proposal = p.maybe_shrink_isr(5, now_ms=LAG + 1)
    assert proposal is not None
    assert p.apply_isr_write(proposal, 5, local_leo=5, now_ms=LAG + 1)
    assert (p.isr, p.zk_version, p.high_watermark) == (frozenset({1}), 5, 5)


# ---- expand (§2.5) -----------------------------------------------------------------------------


def test_expansion_needs_the_hw_and_the_epoch_start_offset() -> None:
    # Long after the non-ISR replicas last caught up (time 0), so they do not hold the HW back.
    t0 = 10 * LAG
    p, log = leader(isr=(1,), leo=10, now=t0)  # epoch 0 starts at 10; HW 10 (ISR: the leader)
    assert p.high_watermark == 10
    fetch(p, 2, 9, now=t0 + 1, leo=10)
    assert p.isr_change_in_flight is None
    out = p.update_follower_fetch_state(
        2,
        fetch_offset=10,
        log_start_offset=0,
        fetch_time_ms=t0 + 2,
        leader_end_offset=10,
        local_leo=10,
    )
    assert out.propose_isr is not None and out.propose_isr.kind == "expand"
    assert out.propose_isr.new_state.isr == (1, 2)


def test_the_hw_waits_for_a_replica_whose_expansion_is_being_written() -> None:
    # Found by the simulation (tests/sim). The expansion goes to ZooKeeper asynchronously; once
    # it is written the replica is electable, so the HW must not pass its LEO meanwhile, even
    # though it is not yet in the in-memory ISR nor caught up within the lag. Kafka 2.6 writes
    # under the partition lock before computing the HW; 2.7 counts pending additions
    # ("maximal ISR"). Without this, ISR {1,2,3} would hold HW 10 with replica 2 at LEO 2.
    t0 = 10 * LAG
    p, log = leader(isr=(1, 3), leo=0, now=t0)
    log.log_end_offset = 10  # appended in this epoch
    fetch(p, 3, 2, now=t0 + 1, leo=10)
    assert p.high_watermark == 2
    out = p.update_follower_fetch_state(
        2,
        fetch_offset=2,
        log_start_offset=0,
        fetch_time_ms=t0 + 2,
        leader_end_offset=10,
        local_leo=10,
    )
    assert out.propose_isr is not None and out.propose_isr.changed == {2}
    fetch(p, 3, 10, now=t0 + 3, leo=10)  # the other ISR member catches up meanwhile
    assert p.high_watermark == 2
    p.apply_isr_write(out.propose_isr, 5, 10, t0 + 4)
    assert p.isr == {1, 2, 3} and p.high_watermark == 2
    fetch(p, 2, 10, now=t0 + 5, leo=10)
    assert p.high_watermark == 10


def test_a_non_replica_fetch_is_not_tracked() -> None:
    p, _ = leader()
    out = p.update_follower_fetch_state(
        9, fetch_offset=0, log_start_offset=0, fetch_time_ms=0, leader_end_offset=0, local_leo=0
    )
    assert not out.known_replica


# ---- HW (§2.6, pitfalls 6, 7) -----------------------------------------------------------------


def test_a_new_leader_cannot_advance_the_hw_until_every_isr_follower_fetched() -> None:
    p, log = leader(isr=(1, 2, 3), leo=10)
    assert p.high_watermark == 0  # remote LEOs are unknown (-1)
    assert p.latest_offset_for_clients() == (ErrorCode.OFFSET_NOT_AVAILABLE, -1)
    fetch(p, 2, 10, now=1, leo=10)
    assert p.high_watermark == 0
    fetch(p, 3, 10, now=1, leo=10)
    assert p.high_watermark == 10
    assert p.latest_offset_for_clients() == (ErrorCode.NONE, 10)


def test_a_caught_up_follower_outside_the_isr_holds_the_hw_back() -> None:
    p, log = leader(isr=(1, 2), leo=0, now=0)
    log.log_end_offset = 10
    fetch(p, 3, 0, now=100, leo=0)  # not in the ISR, but caught up at t=100
    # Its expansion fails (a conflicting write), so it stays outside the ISR.
    proposal = p.isr_change_in_flight
    assert proposal is not None
    p.apply_isr_write(proposal, None, 0, 100)
    fetch(p, 2, 10, now=100, leo=10)
    assert p.high_watermark == 0  # broker 3's LEO 0 counts: it is within the lag
    fetch(p, 2, 10, now=100 + LAG + 1, leo=10)
    p.maybe_increment_leader_hw(10, now_ms=100 + LAG + 1)
    assert p.high_watermark == 10  # no longer caught up within the lag: ignored


# ---- acks=all (§2.10) -------------------------------------------------------------------------


def test_acks_all_admission_counts_the_leader_in_min_isr() -> None:
    p, _ = leader(isr=(1, 2), min_isr=2)
    assert p.check_append(-1) is ErrorCode.NONE
    p.isr = frozenset({1})
    assert p.check_append(-1) is ErrorCode.NOT_ENOUGH_REPLICAS
    assert p.check_append(1) is ErrorCode.NONE  # min.insync.replicas only for acks=-1


def test_acks_all_completes_when_the_hw_reaches_last_offset_plus_one() -> None:
    t0 = 10 * LAG  # broker 3 (not in the ISR) last caught up at 0: long ago
    p, log = leader(isr=(1, 2), leo=0, now=t0, min_isr=2)
    fetch(p, 2, 0, now=t0, leo=0)
    log.log_end_offset = 3  # appended offsets 0..2
    assert p.check_enough_replicas_reach_offset(3) == (False, ErrorCode.NONE)
    fetch(p, 2, 3, now=t0 + 1, leo=3)
    assert p.check_enough_replicas_reach_offset(3) == (True, ErrorCode.NONE)
    p.isr = frozenset({1})
    assert p.check_enough_replicas_reach_offset(3) == (
        True,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    )


def test_a_follower_answers_not_leader() -> None:
    p = Partition(TP, local_broker_id=2, replica_lag_time_max_ms=LAG)
    p.make_follower(PartitionState(1, 0, (1, 2), (1, 2), 0, 1))
    assert p.check_append(1) is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert p.check_enough_replicas_reach_offset(0) == (True, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    assert p.isr == frozenset()  # followers keep no ISR (§2.9)


# ---- follower HW, epochs (§3.8, §2.11, §2.9) ---------------------------------------------------


def test_follower_hw_is_the_leaders_clamped_to_the_local_log_and_may_go_down() -> None:
    p = Partition(TP, local_broker_id=2, replica_lag_time_max_ms=LAG)
    log = Offsets(log_end_offset=5, log_start_offset=2)
    assert p.update_follower_high_watermark(9, log) == 5
    assert p.update_follower_high_watermark(1, log) == 2
    assert p.update_follower_high_watermark(3, log) == 3


def test_every_hw_move_and_only_a_move_is_marked_for_the_checkpoint() -> None:
    """The HW checkpoint writes only after a partition marked its HW moved (hw_moved): every
    way the HW changes must mark it, and a rule that leaves it where it was must not."""
    moved: set[TopicPartition] = set()
    p = Partition(TP, local_broker_id=2, replica_lag_time_max_ms=LAG, hw_moved=moved)
    log = Offsets(log_end_offset=5, log_start_offset=0)
    p.initialize_high_watermark(0, log)
    assert moved == set()  # still 0
    p.initialize_high_watermark(3, log)
    assert moved == {TP}
    moved.clear()
    p.update_follower_high_watermark(3, log)
    assert moved == set()
    p.update_follower_high_watermark(4, log)
    assert moved == {TP}
    moved.clear()
    p.on_truncate(2)
    assert (p.high_watermark, moved) == (2, {TP})
    moved.clear()
    p.on_truncate(4)  # the HW is below the new LEO already
    assert moved == set()
    q, _ = leader(isr=(1, 2), leo=5)
    q.hw_moved = moved
    # The follower's LEO moves the leader's HW (replica 3, outside the ISR, no longer counts).
    fetch(q, 2, 3, now=LAG + 1, leo=5)
    assert (q.high_watermark, moved) == (3, {TP})
    moved.clear()
    assert not q.maybe_increment_leader_hw(5, now_ms=LAG + 1)
    assert moved == set()


def test_current_leader_epoch_fencing() -> None:
    p, _ = leader()
    p.leader_epoch = 5
    assert p.check_current_leader_epoch(None) is ErrorCode.NONE
    assert p.check_current_leader_epoch(-1) is ErrorCode.NONE
    assert p.check_current_leader_epoch(4) is ErrorCode.FENCED_LEADER_EPOCH
    assert p.check_current_leader_epoch(6) is ErrorCode.UNKNOWN_LEADER_EPOCH
    assert p.check_current_leader_epoch(5) is ErrorCode.NONE


def test_make_leader_puts_the_new_epoch_in_the_cache_at_the_leo() -> None:
    p, log = leader(leo=7)
    assert [(e.epoch, e.start_offset) for e in log.epoch_cache.entries] == [(0, 7)]
    assert p.leader_epoch_start_offset == 7


def test_make_follower_reports_every_epoch_change() -> None:
    p = Partition(TP, local_broker_id=2, replica_lag_time_max_ms=LAG)
    assert p.make_follower(PartitionState(1, 0, (1, 2), (1, 2), 0, 1))
    assert p.make_follower(PartitionState(1, 1, (1, 2), (1, 2), 1, 1))  # same leader, new epoch
    assert not p.make_follower(PartitionState(1, 1, (1, 2), (1, 2), 1, 1))


# ---- properties ---------------------------------------------------------------------------------


@given(
    steps=st.lists(
        st.tuples(
            st.sampled_from(["append", "fetch2", "fetch3", "shrink", "tick"]),
            st.integers(1, 20),
        ),
        max_size=60,
    )
)
def test_the_leader_hw_never_decreases_and_never_passes_an_isr_member_or_the_leo(
    steps: list[tuple[str, int]],
) -> None:
    p, log = leader(isr=(1, 2, 3))
    follower_leo = {2: 0, 3: 0}
    now = 0
    for action, n in steps:
        before = p.high_watermark
        if action == "append":
            log.log_end_offset += n
            p.maybe_increment_leader_hw(log.log_end_offset, now)
        elif action in ("fetch2", "fetch3"):
            f = 2 if action == "fetch2" else 3
            follower_leo[f] = min(log.log_end_offset, follower_leo[f] + n)
            out = p.update_follower_fetch_state(
                f,
                fetch_offset=follower_leo[f],
                log_start_offset=0,
                fetch_time_ms=now,
                leader_end_offset=log.log_end_offset,
                local_leo=log.log_end_offset,
            )
            if out.propose_isr is not None:
                p.apply_isr_write(out.propose_isr, p.zk_version + 1, log.log_end_offset, now)
        elif action == "shrink":
            proposal = p.maybe_shrink_isr(log.log_end_offset, now)
            if proposal is not None:
                p.apply_isr_write(proposal, p.zk_version + 1, log.log_end_offset, now)
        else:
            now += n * 1000
        assert p.high_watermark >= before
        assert p.high_watermark <= log.log_end_offset
        for f in p.isr - {1}:
            assert p.high_watermark <= max(follower_leo[f], 0)
