"""A deterministic replica set for walk-throughs: real logs (in memory), the real partition and
truncation rules, and a controller and ZooKeeper reduced to the partition's state record.

Each method is one step of a story (produce, one follower fetch, a crash, an election), so a
test reads like the walk-throughs in the seeds and KIPs. The `pre_*` switches restore the
behaviour each fix replaced, to show the failure it fixed:
- mode=HIGH_WATERMARK: truncate to the local HW on becoming follower (before KIP-101);
- kip279=False: the leader answers OffsetsForLeaderEpoch with an offset only, the start of the
  first epoch above the requested one (KIP-101 before KIP-279);
- pre_kafka_7164=True: a follower skips truncation when only the epoch changed, not the leader.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from broker.replication.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from broker.replication.partition import Partition, PartitionState, ProposeIsr
from broker.replication.truncation import (
    TruncationMode,
    decide_from_epoch_answer,
    epoch_to_ask,
    truncate_to_high_watermark,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.records import NewRecord, build_batch, decode_records
from minibroker.core.types import LeaderAndIsr, TopicPartition

TP = TopicPartition("t", 0)
FETCH_WAIT_MS = 500


@dataclass
class Node:
    id: int
    store: MemorySegmentStore
    log: Log
    partition: Partition
    alive: bool = True
    hw_checkpoint: int = 0


@dataclass
class Produce:
    first_offset: int
    last_offset: int
    values: tuple[bytes, ...]
    acks: int
    acked: bool = False
    error: ErrorCode = ErrorCode.NONE


@dataclass
class PendingFetch:
    follower: int
    fetch_offset: int


@dataclass
class ReplicaSet:
    broker_ids: tuple[int, ...]
    mode: TruncationMode = TruncationMode.LEADER_EPOCH
    kip279: bool = True
    pre_kafka_7164: bool = False
    lag_ms: int = 30_000
    min_isr: int = 1
    now: int = 1_000_000
    nodes: dict[int, Node] = field(default_factory=dict)
    zk: LeaderAndIsr = field(default_factory=lambda: LeaderAndIsr(-1, -1, (), 1, 0))
    truncating: set[int] = field(default_factory=set)
    produces: list[Produce] = field(default_factory=list)
    parked: dict[int, PendingFetch] = field(default_factory=dict)
    epochs_asked: list[tuple[int, int]] = field(default_factory=list)  # (follower, epoch)

    def __post_init__(self) -> None:
        for b in self.broker_ids:
            store = MemorySegmentStore()
            self.nodes[b] = Node(b, store, Log(store), self._new_partition(b))

    def _new_partition(self, broker_id: int) -> Partition:
        return Partition(TP, broker_id, self.lag_ms, min_insync_replicas=self.min_isr)

    # ---- views ---------------------------------------------------------------------------

    def node(self, b: int) -> Node:
        return self.nodes[b]

    @property
    def leader(self) -> Node:
        return self.nodes[self.zk.leader]

    def hw(self, b: int) -> int:
        return self.nodes[b].partition.high_watermark

    def leo(self, b: int) -> int:
        return self.nodes[b].log.log_end_offset

    def remote_leo(self, follower: int) -> int:
        return self.leader.partition.remote[follower].log_end_offset

    def records(self, b: int) -> list[tuple[int, bytes | None]]:
        log = self.nodes[b].log
        data = log.read(log.log_start_offset, 1 << 30) if log.log_end_offset else b""
        return [(r.offset, r.value) for r in decode_records(data)]

    def acknowledged(self) -> list[tuple[int, bytes]]:
        return [
            (p.first_offset + i, v)
            for p in self.produces
            if p.acked
            for i, v in enumerate(p.values)
        ]

    # ---- controller ----------------------------------------------------------------------

    def elect(
        self, leader: int, isr: tuple[int, ...] | None = None, *, to: set[int] | None = None
    ) -> None:
        """The controller picks `leader` (epoch + 1), writes the state and sends LeaderAndIsr
        to the live replicas (or only to `to`: a broker may miss it)."""
        new_isr = isr if isr is not None else tuple(b for b in self.zk.isr if self.nodes[b].alive)
        self.zk = LeaderAndIsr(
            leader, self.zk.leader_epoch + 1, new_isr or (leader,), 1, self.zk.zk_version + 1
        )
        targets = to if to is not None else {b for b, n in self.nodes.items() if n.alive}
        for b in sorted(targets):
            self.deliver_leader_and_isr(b)

    def deliver_leader_and_isr(self, b: int) -> None:
        node = self.nodes[b]
        state = PartitionState(
            self.zk.leader,
            self.zk.leader_epoch,
            self.zk.isr,
            self.broker_ids,
            self.zk.zk_version,
            self.zk.controller_epoch,
        )
        if state.leader_epoch <= node.partition.leader_epoch:
            return  # stale or equal epoch: ignored (reference §3.3)
        self.parked.pop(b, None)
        if state.leader == b:
            self.truncating.discard(b)
            node.partition.make_leader(state, node.log, self.now)
            return
        previous_leader = node.partition.leader_id
        changed = node.partition.make_follower(state)
        if self.pre_kafka_7164:
            changed = previous_leader != state.leader
        if changed:
            self.truncating.add(b)

    # ---- clients -------------------------------------------------------------------------

    def produce(self, *values: bytes, acks: int = -1) -> Produce:
        leader = self.leader
        error = leader.partition.check_append(acks)
        if error is not ErrorCode.NONE:
            p = Produce(-1, -1, values, acks, error=error)
            self.produces.append(p)
            return p
        batch = build_batch([NewRecord(None, v) for v in values], base_timestamp=self.now)
        info = leader.log.append_as_leader(batch, leader.partition.leader_epoch)
        leader.partition.maybe_increment_leader_hw(leader.log.log_end_offset, self.now)
        p = Produce(info.first_offset, info.last_offset, values, acks, acked=acks != -1)
        self.produces.append(p)
        self._complete_produces()
        for f in list(self.parked):
            self._complete_fetch(self.parked.pop(f))
        return p

    def _complete_produces(self) -> None:
        for p in self.produces:
            if p.acks == -1 and not p.acked and p.error is ErrorCode.NONE:
                done, error = self.leader.partition.check_enough_replicas_reach_offset(
                    p.last_offset + 1
                )
                if done:
                    p.acked = error is ErrorCode.NONE
                    p.error = error

    # ---- replication ---------------------------------------------------------------------

    def fetch(self, follower: int, max_bytes: int = 1 << 20) -> None:
        """One follower fetch, start to finish: truncation first if needed; a fetch that finds
        nothing waits (max wait) and completes with a fresh read."""
        pending = self.start_fetch(follower, max_bytes)
        if pending is not None:
            self.now += FETCH_WAIT_MS
            self._complete_fetch(self.parked.pop(follower))

    def start_fetch(self, follower: int, max_bytes: int = 1 << 20) -> PendingFetch | None:
        """Send a fetch; returns the parked fetch if it found no data (a produce wakes it)."""
        node = self.nodes[follower]
        if follower in self.truncating:
            self.truncate(follower)
        leader = self.leader
        fetch_offset = node.log.log_end_offset
        # Read first (capturing the leader's LEO and HW), then update the follower's state.
        leader_leo = leader.log.log_end_offset
        leader_hw = leader.partition.high_watermark
        data = leader.log.read(fetch_offset, max_bytes)
        self._update_follower(follower, fetch_offset, leader_leo)
        if not data:
            pending = PendingFetch(follower, fetch_offset)
            self.parked[follower] = pending
            return pending
        self._apply_response(follower, data, leader_hw)
        return None

    def _complete_fetch(self, pending: PendingFetch) -> None:
        # A delayed fetch re-reads on completion (fresh HW) without updating the follower's
        # state again (reference §3.7).
        leader = self.leader
        leader_hw = leader.partition.high_watermark
        data = leader.log.read(pending.fetch_offset, 1 << 20)
        self._apply_response(pending.follower, data, leader_hw)

    def _update_follower(self, follower: int, fetch_offset: int, leader_leo: int) -> None:
        leader = self.leader
        out = leader.partition.update_follower_fetch_state(
            follower,
            fetch_offset=fetch_offset,
            log_start_offset=self.nodes[follower].log.log_start_offset,
            fetch_time_ms=self.now,
            leader_end_offset=leader_leo,
            local_leo=leader.log.log_end_offset,
        )
        if out.propose_isr is not None:
            self._write_isr(out.propose_isr)
        self._complete_produces()

    def _apply_response(self, follower: int, data: bytes, leader_hw: int) -> None:
        node = self.nodes[follower]
        if data:
            node.log.append_as_follower(data)
        node.partition.update_follower_high_watermark(leader_hw, node.log)

    def _write_isr(self, proposal: ProposeIsr) -> None:
        """ZooKeeper's conditional set of the state znode (reference §2.7)."""
        ok = proposal.expected_zk_version == self.zk.zk_version
        new_version = self.zk.zk_version + 1 if ok else None
        if ok:
            self.zk = LeaderAndIsr(
                self.zk.leader,
                self.zk.leader_epoch,
                proposal.new_state.isr,
                1,
                self.zk.zk_version + 1,
            )
        leader = self.leader
        leader.partition.apply_isr_write(proposal, new_version, leader.log.log_end_offset, self.now)
        self._complete_produces()

    def isr_expiration(self) -> None:
        """One run of the leader's isr-expiration task."""
        leader = self.leader
        proposal = leader.partition.maybe_shrink_isr(leader.log.log_end_offset, self.now)
        if proposal is not None:
            self._write_isr(proposal)

    def truncate(self, follower: int) -> None:
        """The follower's truncation phase against the current leader (reference §4.4)."""
        node = self.nodes[follower]
        leader = self.leader
        while True:
            epoch = epoch_to_ask(self.mode, node.log.epoch_cache)
            if epoch is None:
                decision = truncate_to_high_watermark(
                    node.partition.high_watermark, node.log.log_end_offset
                )
            else:
                self.epochs_asked.append((follower, epoch))
                answer = self._leader_answer(leader, epoch)
                decision = decide_from_epoch_answer(
                    leader_epoch=answer[0],
                    leader_end_offset=answer[1],
                    cache=node.log.epoch_cache,
                    log_end_offset=node.log.log_end_offset,
                    initial_fetch_offset=node.partition.high_watermark,
                )
            node.log.truncate_to(decision.offset)
            node.partition.on_truncate(node.log.log_end_offset)
            if decision.done:
                break
        self.truncating.discard(follower)

    def _leader_answer(self, leader: Node, requested: int) -> tuple[int, int]:
        cache = leader.log.epoch_cache
        if self.kip279:
            return cache.end_offset_for(requested, leader.log.log_end_offset)
        # Before KIP-279 the answer was an offset only: the LEO for the latest epoch, else the
        # start of the first epoch above the requested one.
        if requested == cache.latest_epoch:
            return UNDEFINED_EPOCH, leader.log.log_end_offset
        later = [e.start_offset for e in cache.entries if e.epoch > requested]
        return UNDEFINED_EPOCH, later[0] if later else UNDEFINED_OFFSET

    # ---- failures ------------------------------------------------------------------------

    def tick(self, ms: int) -> None:
        self.now += ms

    def checkpoint_hw(self, *brokers: int) -> None:
        for b in brokers or tuple(self.nodes):
            self.nodes[b].hw_checkpoint = self.nodes[b].partition.high_watermark

    def flush(self, *brokers: int) -> None:
        for b in brokers or tuple(self.nodes):
            self.nodes[b].log.flush()

    def crash(self, b: int) -> None:
        """Power loss: the process dies and unflushed log bytes are gone."""
        node = self.nodes[b]
        node.store.crash()
        node.alive = False
        self.parked.pop(b, None)
        self.truncating.discard(b)

    def restart(self, b: int) -> None:
        """The broker comes back: log recovery, HW from its checkpoint; it waits for a
        LeaderAndIsr (deliver_leader_and_isr or elect)."""
        node = self.nodes[b]
        node.log = Log(node.store)
        node.partition = self._new_partition(b)
        node.partition.initialize_high_watermark(node.hw_checkpoint, node.log)
        node.alive = True
