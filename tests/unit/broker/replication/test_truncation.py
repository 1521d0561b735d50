"""The follower's truncation decisions (reference §4.4, §4.5)."""

from __future__ import annotations

from broker.replication.leader_epoch import EpochEntry, LeaderEpochCache
from broker.replication.truncation import (
    TruncationDecision,
    TruncationMode,
    decide_from_epoch_answer,
    decide_out_of_range,
    epoch_to_ask,
)


def cache(*pairs: tuple[int, int]) -> LeaderEpochCache:
    return LeaderEpochCache(EpochEntry(e, o) for e, o in pairs)


def decide(
    leader: tuple[int, int], c: LeaderEpochCache, leo: int, hw: int = 0
) -> TruncationDecision:
    return decide_from_epoch_answer(
        leader_epoch=leader[0],
        leader_end_offset=leader[1],
        cache=c,
        log_end_offset=leo,
        initial_fetch_offset=hw,
    )


def test_an_undefined_leader_answer_falls_back_to_the_high_watermark() -> None:
    assert decide((-1, -1), cache((0, 0)), leo=7, hw=3) == TruncationDecision(3, done=True)


def test_an_old_protocol_answer_truncates_to_its_offset() -> None:
    assert decide((-1, 4), cache((0, 0)), leo=7) == TruncationDecision(4, done=True)


def test_same_epoch_truncates_to_the_smaller_end() -> None:
    # KIP-101 scenario 2: the leader's epoch 0 ended at 1; the follower's runs to its LEO 2.
    assert decide((0, 1), cache((0, 0)), leo=2) == TruncationDecision(1, done=True)
    # KIP-101 scenario 1: the same epoch is the leader's latest: it ends at the leader LEO.
    assert decide((0, 2), cache((0, 0)), leo=2) == TruncationDecision(2, done=True)


def test_an_epoch_unknown_to_the_follower_takes_another_round() -> None:
    # KIP-279: the leader answers (1, 21); the follower knows epochs 0 and 2 but not 1, so it
    # cuts to the end of epoch 0 and asks again with epoch 0.
    c = cache((0, 0), (2, 11))
    d = decide((1, 21), c, leo=16)
    assert d == TruncationDecision(11, done=False)


def test_kip_279_follower_knowing_the_leaders_epoch_truncates_to_its_end() -> None:
    # B has epoch 1 up to 11 and epoch 2 after; A answers (1, 21) for B's epoch 2.
    c = cache((1, 0), (2, 11))
    assert decide((1, 21), c, leo=26) == TruncationDecision(11, done=True)


def test_a_follower_without_epochs_up_to_the_answer_keeps_min_of_answer_and_leo() -> None:
    assert decide((3, 9), cache(), leo=12) == TruncationDecision(9, done=True)


def test_high_watermark_mode_never_asks_the_leader() -> None:
    c = cache((0, 0))
    assert epoch_to_ask(TruncationMode.LEADER_EPOCH, c) == 0
    assert epoch_to_ask(TruncationMode.HIGH_WATERMARK, c) is None
    assert epoch_to_ask(TruncationMode.LEADER_EPOCH, cache()) is None  # §4.1 fallback


def test_out_of_range_ahead_of_the_leader_truncates_to_its_leo() -> None:
    d = decide_out_of_range(leader_log_end_offset=5, leader_log_start_offset=0, log_end_offset=9)
    assert (d.truncate_to, d.fetch_offset, d.restart_at) == (5, 5, None)


def test_out_of_range_behind_the_leaders_start_restarts_the_log_there() -> None:
    d = decide_out_of_range(leader_log_end_offset=50, leader_log_start_offset=20, log_end_offset=9)
    assert (d.truncate_to, d.fetch_offset, d.restart_at) == (None, 20, 20)
    d = decide_out_of_range(leader_log_end_offset=50, leader_log_start_offset=5, log_end_offset=9)
    assert (d.truncate_to, d.fetch_offset, d.restart_at) == (None, 9, None)
