"""Each of the checker's invariants on hand-made histories: a healthy run passes, and one
break of the rule is reported with its evidence."""

from __future__ import annotations

from dataclasses import replace

import pytest

from minibroker.scenarios.history import FetchRead, ReplicaLog
from minibroker.scenarios.invariants import (
    INVARIANTS,
    acked_records_present,
    at_most_one_leader_per_epoch,
    check_all,
    isr_within_replicas,
    leader_epochs_grow,
    leader_hw_never_decreases,
    leader_in_isr,
    no_read_past_hw,
    replicas_agree_below_hw,
    unclean_elections,
)
from tests.unit.scenarios.histories import batches, healthy, sample, state


def test_a_healthy_history_violates_nothing() -> None:
    h = healthy()
    h.reads = [FetchRead(300, 1, 0, 0, 4, "NONE", 0, 3, 4)]
    assert check_all(h) == []


def test_there_are_the_eight_invariants_of_the_issue() -> None:
    assert len(INVARIANTS) == 8


# ---- every acked record is present at its offset ------------------------------------------------


def test_an_acked_record_missing_from_the_validating_read_is_reported() -> None:
    h = healthy()
    del h.final.read[0][2]
    [v] = acked_records_present(h)
    assert v.invariant == "acked-records-present" and not v.expected
    assert "t-0 offset 2: acked 'v2' but offset not read" in v.message
    assert v.evidence["in_logs_of"] == [1, 2, 3]  # lost between the files and the read


def test_an_acked_record_replaced_by_another_value_is_reported() -> None:
    h = healthy()
    h.final.read[0][1] = "other"
    h.final.read[0][4] = "v1"
    [v] = acked_records_present(h)
    assert "offset 1: acked 'v1' but offset holds 'other'" in v.message
    assert v.evidence["read_at_offsets"] == [4]


def test_failed_and_unanswered_records_may_be_missing() -> None:
    h = healthy()
    h.produced[2] = replace(h.produced[2], outcome="failed", error="REQUEST_TIMED_OUT")
    h.produced[3] = replace(h.produced[3], outcome="pending")
    del h.final.read[0][2], h.final.read[0][3]
    assert acked_records_present(h) == []


def _unclean(h_expected: bool) -> tuple[list[str], list[bool]]:
    """Broker 3 leaves the ISR; records 2 and 3 are acked by 1 and 2; both die; broker 3 is
    elected uncleanly at epoch 2 with its log ending at 2."""
    h = healthy()
    h.unclean_loss_expected = h_expected
    h.states = [
        state(0, 1, 0, (1, 2, 3)),
        state(1, 1, 1, (1, 2), ts=150),
        state(2, -1, 2, (1,), ts=300),
        state(3, 3, 3, (3,), ts=400),
    ]
    h.final.leader[0] = 3
    h.final.read[0] = {0: "v0", 1: "v1", 2: "new2"}
    h.final.high_watermark[0] = 3
    h.logs[2].epochs = [(0, 0), (3, 2)]
    h.logs[2].batches = batches((0, 0, 0), (1, 1, 0), (2, 2, 3))
    for g in h.logs[:2]:
        g.batches = list(h.logs[2].batches)
    violations = acked_records_present(h)
    return [v.message for v in violations], [v.expected for v in violations]


def test_unclean_election_loss_is_expected_only_when_the_scenario_says_so() -> None:
    messages, expected = _unclean(True)
    assert len(messages) == 2 and expected == [True, True]
    assert "unclean election of broker 3 at epoch 3, whose log ended at 2" in messages[0]
    messages, expected = _unclean(False)
    assert expected == [False, False]


def test_unclean_elections_are_found_in_zookeepers_history() -> None:
    h = healthy()
    h.states = [state(0, 1, 0, (1, 2, 3)), state(1, -1, 1, (1,)), state(2, 3, 2, (3,))]
    h.logs[0].epochs = [(0, 0), (2, 4)]
    [u] = unclean_elections(h)
    assert (u.leader, u.leader_epoch, u.start_offset) == (3, 2, 4)
    h.states = [state(0, 1, 0, (1, 2, 3)), state(1, 2, 1, (2, 3))]
    assert unclean_elections(h) == []  # a clean election: 2 was in the ISR


def test_an_acked_record_below_the_unclean_leaders_log_end_is_still_a_violation() -> None:
    h = healthy()
    h.unclean_loss_expected = True
    h.states = [state(0, 1, 0, (1, 2)), state(1, 3, 1, (3,), ts=400)]
    h.logs[0].epochs = [(0, 0), (1, 3)]
    del h.final.read[0][1]
    [v] = acked_records_present(h)
    assert not v.expected  # offset 1 < 3: the unclean leader had it, so losing it is a bug


# ---- replicas agree below the HW ----------------------------------------------------------------


def test_a_replica_differing_below_the_hw_is_reported() -> None:
    h = healthy()
    h.logs[1].batches = batches((0, 0, 0), (1, 1, 0), (2, 2, 1), (3, 3, 1))
    [v] = replicas_agree_below_hw(h)
    assert "broker 2's log differs from leader 1's below offset 4: batch 2" in v.message
    assert v.evidence["batch_index"] == 2


def test_an_isr_member_short_of_the_hw_is_reported() -> None:
    h = healthy()
    h.logs[2].batches = h.logs[2].batches[:2]
    [v] = replicas_agree_below_hw(h)
    assert "broker 3's log differs" in v.message and "nothing on 3" in v.message


def test_a_replica_outside_the_isr_is_compared_up_to_its_own_hw() -> None:
    h = healthy()
    h.final.isr[0] = (1, 2)
    h.logs[2].batches = batches((0, 0, 0), (1, 1, 0), (2, 2, 7))  # a divergent tail...
    h.logs[2].high_watermark = 2  # ...above what it knew was committed
    assert replicas_agree_below_hw(h) == []
    h.logs[2].high_watermark = 3
    assert len(replicas_agree_below_hw(h)) == 1


def test_a_leader_log_ending_below_its_hw_is_reported() -> None:
    h = healthy()
    h.logs[0].batches = h.logs[0].batches[:3]
    found = replicas_agree_below_hw(h)
    assert "leader 1's log ends at 3, below its HW 4" in found[0].message


def test_an_unreadable_leader_log_is_reported() -> None:
    h = healthy()
    h.logs[0] = ReplicaLog(1, 0, error="no directory /x")
    [v] = replicas_agree_below_hw(h)
    assert "cannot be read: no directory /x" in v.message


# ---- the leader's HW never decreases within an epoch --------------------------------------------


def test_a_leader_hw_going_back_within_an_epoch_is_reported() -> None:
    h = healthy()
    h.hw_samples = [sample(1, 5), sample(1, 7), sample(1, 6, ts=9000)]
    [v] = leader_hw_never_decreases(h)
    assert "leader 1's HW went from 7 down to 6 in epoch 0" in v.message


def test_a_lower_hw_in_a_new_epoch_or_on_a_follower_is_fine() -> None:
    h = healthy()
    h.hw_samples = [
        sample(1, 7),
        sample(2, 7, epoch=1, leader=2, isr=(2, 3), ts=9000),
        sample(1, 5, epoch=1, leader=2, ts=9100),  # 1 follows now: its HW may go down
        sample(2, 6, epoch=2, leader=2, isr=(2, 3), ts=9200),
    ]
    assert leader_hw_never_decreases(h) == []


# ---- no consumer reads past the HW --------------------------------------------------------------


def test_a_record_returned_at_or_above_the_responses_hw_is_reported() -> None:
    h = healthy()
    h.reads = [FetchRead(300, 1, 0, 0, 3, "NONE", 0, 3, 4), FetchRead(301, 1, 0, 4, 4)]
    [v] = no_read_past_hw(h)
    assert "broker 1 returned offsets 0..3 with HW 3" in v.message


# ---- the leader is in the ISR -------------------------------------------------------------------


def test_a_zookeeper_state_with_the_leader_outside_the_isr_is_reported() -> None:
    h = healthy()
    h.states.append(state(1, 1, 0, (2, 3)))
    h.states.append(state(2, -1, 1, (2,)))  # no leader: nothing to check
    [v] = leader_in_isr(h)
    assert "ZooKeeper state v1 has leader 1 outside ISR [2, 3]" in v.message


def test_a_leader_reporting_an_isr_without_itself_is_reported() -> None:
    h = healthy()
    h.hw_samples.append(sample(1, 9, isr=(2, 3)))
    [v] = leader_in_isr(h)
    assert "leader 1 reported ISR [2, 3] without itself" in v.message


# ---- leader epochs only grow --------------------------------------------------------------------


def test_an_epoch_going_back_in_zookeeper_is_reported() -> None:
    h = healthy()
    h.states = [state(0, 1, 3, (1, 2)), state(1, 2, 2, (2,))]
    [v] = leader_epochs_grow(h)
    assert "from leader 1 epoch 3 (v0) to leader 2 epoch 2 (v1)" in v.message


def test_a_new_leader_without_a_new_epoch_is_reported() -> None:
    h = healthy()
    h.states = [state(0, 1, 3, (1, 2)), state(1, 2, 3, (1, 2))]
    assert len(leader_epochs_grow(h)) == 1


def test_isr_changes_keep_the_epoch() -> None:
    h = healthy()
    h.states = [state(0, 1, 3, (1, 2, 3)), state(1, 1, 3, (1, 2)), state(2, -1, 4, (1,))]
    assert leader_epochs_grow(h) == []


def test_a_broker_seeing_an_older_epoch_within_one_life_is_reported() -> None:
    h = healthy()
    h.hw_samples = [sample(2, 1, epoch=4), sample(2, 1, epoch=3)]
    [v] = leader_epochs_grow(h)
    assert "broker 2 went from epoch 4 back to 3" in v.message
    h.hw_samples = [sample(2, 1, epoch=4), sample(2, 1, epoch=3, life=11)]
    assert leader_epochs_grow(h) == []  # a restart starts afresh


# ---- at most one leader per partition per epoch -------------------------------------------------


def test_two_brokers_leading_in_one_epoch_are_reported() -> None:
    h = healthy()
    h.hw_samples += [sample(2, 3, leader=2, epoch=0, isr=(2, 3))]
    [v] = at_most_one_leader_per_epoch(h)
    assert "leaders [1] and 2 both in epoch 0 (seen in the brokers)" in v.message


def test_two_leaders_of_one_epoch_in_zookeeper_are_reported() -> None:
    h = healthy()
    h.states.append(state(1, 2, 0, (2, 3)))
    found = at_most_one_leader_per_epoch(h)
    assert any("leaders [1] and 2 both in epoch 0 (seen in ZooKeeper)" in v.message for v in found)


def test_a_stale_leader_in_an_older_epoch_is_not_a_second_leader() -> None:
    h = healthy()
    h.hw_samples += [sample(2, 3, leader=2, epoch=1, isr=(2, 3)), sample(1, 4)]
    assert at_most_one_leader_per_epoch(h) == []


# ---- the ISR is within the replicas -------------------------------------------------------------


@pytest.mark.parametrize("isr", [(1, 4), (5,)])
def test_an_isr_with_a_non_replica_is_reported(isr: tuple[int, ...]) -> None:
    h = healthy()
    h.states.append(state(1, isr[0], 1, isr))
    h.hw_samples.append(sample(1, 9, isr=(1, 7)))
    found = isr_within_replicas(h)
    assert len(found) == 2
    assert "has non-replicas" in found[0].message and "[7]" in found[1].message
