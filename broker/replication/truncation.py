"""Where a follower truncates its log before fetching (reference §4.1, §4.4, §4.5).

Two modes. LEADER_EPOCH is Kafka's since KIP-101/KIP-279: ask the leader where the follower's
latest epoch ends and truncate to the divergence point, possibly over several rounds.
HIGH_WATERMARK is the pre-KIP-101 rule — truncate to the local HW — kept deliberately as an
explicit option so that tests can show the data loss and divergence the KIPs describe, and
the mode PlantedBug.TRUNCATE_TO_HW switches a broker to (tests only).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from broker.replication.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET, LeaderEpochCache
from minibroker.core.planted_bugs import PlantedBug


class TruncationMode(Enum):
    LEADER_EPOCH = "leader-epoch"
    HIGH_WATERMARK = "high-watermark"


def truncation_mode(planted_bug: PlantedBug = PlantedBug.NONE) -> TruncationMode:
    """Kafka's mode, unless the test-only planted bug asks for the pre-KIP-101 one."""
    if planted_bug is PlantedBug.TRUNCATE_TO_HW:
        return TruncationMode.HIGH_WATERMARK
    return TruncationMode.LEADER_EPOCH


@dataclass(frozen=True)
class TruncationDecision:
    """Truncate the local log to `offset`; if not `done`, ask the leader again with the
    (now smaller) latest local epoch (KIP-279 multi-round)."""

    offset: int
    done: bool


def epoch_to_ask(mode: TruncationMode, cache: LeaderEpochCache) -> int | None:
    """The epoch for OffsetsForLeaderEpoch, or None: truncate to the HW instead (§4.1: the
    pre-KIP-101 mode, or a follower whose epoch cache is empty)."""
    if mode is TruncationMode.HIGH_WATERMARK or cache.latest_epoch == UNDEFINED_EPOCH:
        return None
    return cache.latest_epoch


def truncate_to_high_watermark(high_watermark: int, log_end_offset: int) -> TruncationDecision:
    return TruncationDecision(min(high_watermark, log_end_offset), done=True)


def decide_from_epoch_answer(
    *,
    leader_epoch: int,
    leader_end_offset: int,
    cache: LeaderEpochCache,
    log_end_offset: int,
    initial_fetch_offset: int,
) -> TruncationDecision:
    """Reference §4.4 step 3 (Kafka's AbstractFetcherThread.getOffsetTruncationState), given
    the leader's answer (epoch E, end offset O) to OffsetsForLeaderEpoch."""
    if leader_end_offset == UNDEFINED_OFFSET:
        return TruncationDecision(initial_fetch_offset, done=True)
    if leader_epoch == UNDEFINED_EPOCH:
        # An old-protocol answer: an end offset without an epoch.
        return TruncationDecision(min(leader_end_offset, log_end_offset), done=True)
    follower_epoch, follower_end = cache.end_offset_for(leader_epoch, log_end_offset)
    if follower_end == UNDEFINED_OFFSET:
        # The follower has no epoch at or below E (and none after it).
        return TruncationDecision(min(leader_end_offset, log_end_offset), done=True)
    if follower_epoch != leader_epoch:
        # The follower does not know epoch E: cut to the end of its largest epoch below E and
        # ask again with that epoch (KIP-279).
        return TruncationDecision(min(follower_end, log_end_offset), done=False)
    return TruncationDecision(min(follower_end, leader_end_offset, log_end_offset), done=True)


@dataclass(frozen=True)
class OutOfRangeDecision:
    """After OFFSET_OUT_OF_RANGE: truncate to `truncate_to` (or, if `restart_at` is set,
    empty the log and restart it there), then fetch from `fetch_offset`."""

    fetch_offset: int
    truncate_to: int | None = None
    restart_at: int | None = None


def decide_out_of_range(
    *, leader_log_end_offset: int, leader_log_start_offset: int, log_end_offset: int
) -> OutOfRangeDecision:
    """Reference §4.5: a follower ahead of the leader truncates to the leader's LEO (unclean
    election); one behind the leader's log start restarts its log there."""
    if leader_log_end_offset < log_end_offset:
        return OutOfRangeDecision(leader_log_end_offset, truncate_to=leader_log_end_offset)
    if leader_log_start_offset > log_end_offset:
        return OutOfRangeDecision(leader_log_start_offset, restart_at=leader_log_start_offset)
    return OutOfRangeDecision(max(leader_log_start_offset, log_end_offset))
