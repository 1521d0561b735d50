"""The replication state of one partition on one broker, and Kafka 2.6's rules over it.

Theory of operation (reference §2). On the leader, every remote replica's LEO is the fetch
offset of its latest fetch; `last_caught_up_time_ms` is the last time it had reached the
leader's LEO — or the leader's LEO as of its previous fetch (§2.1), so a follower under constant
load stays in sync. The high watermark (HW) is the smallest LEO among the leader, the ISR and the
replicas caught up within `replica.lag.time.max.ms`, and only moves forward (§2.6). The ISR
shrinks when a follower is behind the leader's LEO and has not caught up for longer than the lag
(§2.4); it grows when a follower's LEO reaches the HW and the current epoch's start (§2.5).
ISR changes are proposals carrying the cached zkVersion; they take effect only when the
conditional ZooKeeper write succeeds (§2.7). On a follower the ISR is empty and the HW is the
leader's, clamped to the local log (§3.8). Every method takes the time as `now_ms`; the broker's
shells do the I/O and report back.

`planted_bug` (tests only, minibroker.core.planted_bugs) swaps in a known-wrong rule so the
simulation and the scenario checkers can show they catch it; PlantedBug.NONE is Kafka's rules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from broker.replication.leader_epoch import LeaderEpochCache
from broker.replication.replica import UNKNOWN_OFFSET, RemoteReplica
from minibroker.core.errors import ErrorCode
from minibroker.core.planted_bugs import PlantedBug
from minibroker.core.types import LeaderAndIsr, TopicPartition

NO_EPOCH = -1
_NONE: frozenset[int] = frozenset()


class LocalLog(Protocol):
    """What the rules need from the partition's log (broker.log.Log satisfies it)."""

    @property
    def log_end_offset(self) -> int: ...

    @property
    def log_start_offset(self) -> int: ...

    @property
    def epoch_cache(self) -> LeaderEpochCache: ...


@dataclass(frozen=True)
class PartitionState:
    """A partition's entry in a LeaderAndIsr request (reference §6.1)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    replicas: tuple[int, ...]
    zk_version: int
    controller_epoch: int


@dataclass(frozen=True)
class ProposeIsr:
    """Write `new_state` to the partition's state znode if it is still at `expected_zk_version`."""

    tp: TopicPartition
    new_state: LeaderAndIsr
    expected_zk_version: int
    kind: str  # "shrink" | "expand"
    changed: frozenset[int]  # the replicas removed or added

    @property
    def isr(self) -> frozenset[int]:
        return frozenset(self.new_state.isr)


@dataclass(frozen=True)
class FollowerFetchOutcome:
    known_replica: bool
    hw_changed: bool = False
    propose_isr: ProposeIsr | None = None


@dataclass
class Partition:
    """One partition as seen by broker `local_broker_id` (leader or follower)."""

    tp: TopicPartition
    local_broker_id: int
    replica_lag_time_max_ms: int
    min_insync_replicas: int = 1
    leader_id: int | None = None
    leader_epoch: int = NO_EPOCH
    leader_epoch_start_offset: int | None = None
    isr: frozenset[int] = frozenset()
    assignment: tuple[int, ...] = ()
    zk_version: int = 0
    controller_epoch: int = 0
    high_watermark: int = 0
    remote: dict[int, RemoteReplica] = field(default_factory=dict)
    # Kafka writes the ISR under the partition's write lock, so no second change can start
    # meanwhile. Our shells do not block the loop during the write; the partition instead
    # refuses new proposals until the outcome of the one in flight is applied.
    isr_change_in_flight: ProposeIsr | None = None
    planted_bug: PlantedBug = field(default=PlantedBug.NONE, kw_only=True)
    # The shell's set of partitions whose HW moved since it last looked: its HW checkpoint
    # then writes only when one did, instead of reading 10,000 HWs a second to find out.
    hw_moved: set[TopicPartition] | None = field(default=None, kw_only=True, compare=False)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.local_broker_id

    # ---- high watermark ------------------------------------------------------------------

    def _set_high_watermark(self, value: int) -> None:
        if value != self.high_watermark:
            self.high_watermark = value
            if self.hw_moved is not None:
                self.hw_moved.add(self.tp)

    def initialize_high_watermark(self, checkpointed: int, log: LocalLog) -> None:
        """HW from the checkpoint file (0 if absent), clamped to the log (reference §3.5)."""
        self._set_high_watermark(_clamp(checkpointed, log.log_start_offset, log.log_end_offset))

    def maybe_increment_leader_hw(self, local_leo: int, now_ms: int) -> bool:
        """Reference §2.6: HW := min LEO over the leader, the (maximal) ISR and the replicas
        caught up within the lag; it only moves forward. Returns whether it moved.

        Triggered by 1. a follower fetch that moved its LEO 2. a leader append 3. an ISR shrink
        4. make_leader."""
        if not self.is_leader:
            return False
        candidate = local_leo
        isr_always_counts = self.planted_bug is not PlantedBug.HW_FROM_ALL_REPLICAS
        isr = self.maximal_isr
        for replica in self.remote.values():
            recent = now_ms - replica.last_caught_up_time_ms <= self.replica_lag_time_max_ms
            in_isr = isr_always_counts and replica.broker_id in isr
            if replica.log_end_offset < candidate and (recent or in_isr):
                candidate = replica.log_end_offset
        assert candidate <= local_leo, "HW candidate above the leader's LEO"
        if candidate > self.high_watermark:
            self._set_high_watermark(candidate)
            return True
        return False

    @property
    def maximal_isr(self) -> frozenset[int]:
        """The ISR plus a replica whose expansion is being written (Kafka 2.7's "maximal ISR").
        Once written it is in ZooKeeper's ISR, so electable: the HW must wait for it already.
        Kafka 2.6 needs no such thing because it writes under the partition lock, before it
        computes the HW; our shells write without blocking (see isr_change_in_flight)."""
        pending = self.isr_change_in_flight
        if pending is not None and pending.kind == "expand":
            return self.isr | pending.changed
        return self.isr

    def update_follower_high_watermark(self, leader_hw: int, log: LocalLog) -> int:
        """Reference §3.8: follower HW := clamp(leader HW, log start, LEO); it may go down."""
        self._set_high_watermark(_clamp(leader_hw, log.log_start_offset, log.log_end_offset))
        return self.high_watermark

    def on_truncate(self, local_leo: int) -> None:
        """The local log was truncated: the HW cannot stay above the LEO (pitfall 23)."""
        self._set_high_watermark(min(self.high_watermark, local_leo))

    # ---- leadership ----------------------------------------------------------------------

    def _apply_common(self, state: PartitionState) -> None:
        self.controller_epoch = state.controller_epoch
        self.assignment = state.replicas
        self.leader_epoch = state.leader_epoch
        self.zk_version = state.zk_version
        self.leader_id = state.leader
        self.isr_change_in_flight = None
        wanted = set(state.replicas) - {self.local_broker_id}
        for gone in set(self.remote) - wanted:
            del self.remote[gone]
        for b in wanted:
            self.remote.setdefault(b, RemoteReplica(b))

    def make_leader(self, state: PartitionState, log: LocalLog, now_ms: int) -> bool:
        """Reference §2.8. Returns whether this broker was not leader before."""
        was_leader = self.is_leader
        self._apply_common(state)
        self.isr = frozenset(state.isr)
        leo = log.log_end_offset
        self.leader_epoch_start_offset = leo
        # The new epoch enters the cache at once, before any record is written in it (KAFKA-7415).
        log.epoch_cache.assign(state.leader_epoch, leo)
        for replica in self.remote.values():
            caught_up = now_ms if replica.broker_id in self.isr else 0
            replica.reset_last_caught_up_time(leo, now_ms, caught_up)
        if not was_leader:
            # A new leader knows nothing of its followers' LEOs (pitfall 7).
            for replica in self.remote.values():
                replica.update_fetch_state(UNKNOWN_OFFSET, UNKNOWN_OFFSET, 0, UNKNOWN_OFFSET)
        self.maybe_increment_leader_hw(leo, now_ms)
        return not was_leader

    def make_follower(self, state: PartitionState) -> bool:
        """Reference §2.9: the ISR is only kept by leaders. Returns whether the leader or its
        epoch changed (every epoch change sends the follower back to truncation, pitfall 18)."""
        changed = self.leader_id != state.leader or self.leader_epoch != state.leader_epoch
        self._apply_common(state)
        self.isr = frozenset()
        self.leader_epoch_start_offset = None
        return changed

    # ---- follower fetches on the leader --------------------------------------------------

    def update_follower_fetch_state(
        self,
        follower_id: int,
        *,
        fetch_offset: int,
        log_start_offset: int,
        fetch_time_ms: int,
        leader_end_offset: int,
        local_leo: int,
    ) -> FollowerFetchOutcome:
        """Reference §2.3, called after the read for a follower's fetch (read first, then
        update: the response carries the HW from before this fetch, pitfall 4)."""
        replica = self.remote.get(follower_id)
        if replica is None:
            return FollowerFetchOutcome(known_replica=False)
        previous_leo = replica.log_end_offset
        replica.update_fetch_state(fetch_offset, log_start_offset, fetch_time_ms, leader_end_offset)
        proposal = self.maybe_expand_isr(follower_id) if follower_id not in self.isr else None
        hw_changed = False
        if replica.log_end_offset != previous_leo:
            hw_changed = self.maybe_increment_leader_hw(local_leo, fetch_time_ms)
        return FollowerFetchOutcome(True, hw_changed, proposal)

    def is_follower_in_sync(self, follower_id: int) -> bool:
        """Reference §2.5: LEO >= HW and >= the current epoch's start offset."""
        replica = self.remote.get(follower_id)
        return (
            replica is not None
            and self.leader_epoch_start_offset is not None
            and replica.log_end_offset >= self.high_watermark
            and replica.log_end_offset >= self.leader_epoch_start_offset
        )

    def maybe_expand_isr(self, follower_id: int) -> ProposeIsr | None:
        if (
            not self.is_leader
            or follower_id in self.isr
            or self.isr_change_in_flight is not None
            or not self.is_follower_in_sync(follower_id)
        ):
            return None
        return self._propose(self.isr | {follower_id}, "expand", frozenset({follower_id}))

    # ---- ISR shrink ------------------------------------------------------------------------

    def out_of_sync_replicas(self, local_leo: int, now_ms: int) -> frozenset[int]:
        """ISR members (not the leader) that are behind and not caught up for > lag (§2.4)."""
        lag = self.replica_lag_time_max_ms
        if self.planted_bug is PlantedBug.SHRINK_ON_NO_FETCH:
            return frozenset(
                b
                for b in self.isr - {self.local_broker_id}
                if b in self.remote and self.remote[b].has_not_fetched_for(now_ms, lag)
            )
        # Over the remote replicas directly: the isr-expiration task asks every led partition
        # each lag/2, and a set difference per partition cost an idle broker of 10,000 more.
        out = _NONE
        for b, r in self.remote.items():
            if r.is_out_of_sync(local_leo, now_ms, lag) and b in self.isr:
                out = out | {b}
        return out

    def maybe_shrink_isr(self, local_leo: int, now_ms: int) -> ProposeIsr | None:
        """The isr-expiration task's check, every replica.lag.time.max.ms / 2 (§3.1)."""
        if not self.is_leader or self.isr_change_in_flight is not None:
            return None
        out = self.out_of_sync_replicas(local_leo, now_ms)
        if not out:
            return None
        new_isr = self.isr - out
        assert self.local_broker_id in new_isr, "the leader never removes itself (pitfall 11)"
        return self._propose(new_isr, "shrink", out)

    def _propose(self, new_isr: frozenset[int], kind: str, changed: frozenset[int]) -> ProposeIsr:
        order = [b for b in self.assignment if b in new_isr]
        order += sorted(new_isr - set(order))
        proposal = ProposeIsr(
            tp=self.tp,
            new_state=LeaderAndIsr(
                leader=self.local_broker_id,
                leader_epoch=self.leader_epoch,  # leader-driven ISR changes keep the epoch
                isr=tuple(order),
                controller_epoch=self.controller_epoch,  # the partition's, pitfall 14
                zk_version=self.zk_version,
            ),
            expected_zk_version=self.zk_version,
            kind=kind,
            changed=changed,
        )
        self.isr_change_in_flight = proposal
        return proposal

    def apply_isr_write(
        self, proposal: ProposeIsr, new_zk_version: int | None, local_leo: int, now_ms: int
    ) -> bool:
        """The conditional write's outcome (§2.7): on success (`new_zk_version` given) the ISR
        and zkVersion change and, for a shrink, the HW may advance; on failure nothing changes
        and the leader waits for the controller's next LeaderAndIsr. Returns whether the HW
        moved."""
        if self.isr_change_in_flight is not proposal:
            return False  # superseded by a LeaderAndIsr while the write was in flight
        self.isr_change_in_flight = None
        if new_zk_version is None:
            return False
        self.isr = proposal.isr
        self.zk_version = new_zk_version
        return self.maybe_increment_leader_hw(local_leo, now_ms)

    # ---- produce -------------------------------------------------------------------------

    def check_append(self, required_acks: int) -> ErrorCode:
        """Reference §2.10: before appending. min.insync.replicas counts the leader and only
        applies to acks=-1; a rejected append writes nothing."""
        if not self.is_leader:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if required_acks == -1 and len(self.isr) < self.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS
        return ErrorCode.NONE

    def check_enough_replicas_reach_offset(self, required_offset: int) -> tuple[bool, ErrorCode]:
        """DelayedProduce's check (§2.10): done when the HW reached `required_offset`
        (= last offset + 1); NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank meanwhile."""
        if not self.is_leader:
            return True, ErrorCode.NOT_LEADER_OR_FOLLOWER
        if self.high_watermark >= required_offset:
            if len(self.isr) >= self.min_insync_replicas:
                return True, ErrorCode.NONE
            return True, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return False, ErrorCode.NONE

    # ---- reads -----------------------------------------------------------------------------

    def check_current_leader_epoch(self, requested: int | None) -> ErrorCode:
        """Reference §2.11: fencing of reads that carry a current leader epoch."""
        if requested is None or requested == NO_EPOCH:
            return ErrorCode.NONE
        if requested < self.leader_epoch:
            return ErrorCode.FENCED_LEADER_EPOCH
        if requested > self.leader_epoch:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        return ErrorCode.NONE

    def latest_offset_for_clients(self) -> tuple[ErrorCode, int]:
        """ListOffsets(LATEST) for a client: the HW, unless a new leader's HW is still below
        its epoch's start offset (pitfall 7) — then OFFSET_NOT_AVAILABLE."""
        start = self.leader_epoch_start_offset
        if start is not None and start > self.high_watermark:
            return ErrorCode.OFFSET_NOT_AVAILABLE, UNKNOWN_OFFSET
        return ErrorCode.NONE, self.high_watermark

    def under_replicated(self) -> bool:
        return self.is_leader and len(self.isr) < len(self.assignment)


def _clamp(value: int, low: int, high: int) -> int:
    return low if value < low else high if value > high else value
