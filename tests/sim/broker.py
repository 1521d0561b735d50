"""A simulated broker: the shell around the real rules, as broker/replica_manager.py and
broker/isr_tasks.py are around them in the real process.

Each partition is a real `Partition` (broker.replication) over a real `Log` on a
MemorySegmentStore that outlives the process; a power loss drops its unflushed bytes, a kill
keeps them (the page cache survives a process). Next to each log the broker keeps its
"shadow": one token per offset naming the batch stored there, so the checker can compare logs
without parsing them. The follower side is tests/sim/fetcher.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from broker.replication.isr_propagation import IsrChangePropagation
from broker.replication.partition import Partition, PartitionState, ProposeIsr
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from tests.sim.config import MIN_INSYNC_REPLICAS, state_path
from tests.sim.fetcher import Fetcher, FetchState
from tests.sim.leader import LeaderSide
from tests.sim.messages import (
    ControlResponse,
    Create,
    EpochRequest,
    FetchRequest,
    Get,
    LeaderAndIsrRequest,
    ListOffsetsRequest,
    MetadataRequest,
    MetadataResponse,
    ProduceRequest,
    SetData,
    Stat,
    UpdateMetadataRequest,
    ZkErr,
)
from tests.sim.process import Process
from tests.sim.zk import ZkClient, ZkTaskGen

if TYPE_CHECKING:
    from tests.sim.runner import Cluster


@dataclass(eq=False)
class Hosted:
    partition: Partition
    log: Log
    shadow: list[int]  # token per offset, kept equal in length to the log
    fetch: FetchState | None = None  # set while this broker follows the partition
    checked: tuple[Any, ...] = ()  # the checker's fingerprint at its last look


@dataclass
class Disk:
    """What survives the process: the partition directories and the HW checkpoint file."""

    stores: dict[TopicPartition, MemorySegmentStore] = field(default_factory=dict)
    shadows: dict[TopicPartition, list[int]] = field(default_factory=dict)
    hw_checkpoint: dict[TopicPartition, int] = field(default_factory=dict)


class SimBroker(Process):
    def __init__(self, cluster: Cluster, broker_id: int) -> None:
        super().__init__(cluster.kernel, cluster.net, broker_id)
        self.cluster = cluster
        self.cfg = cluster.cfg
        self.checker = cluster.checker
        self.disk = Disk()
        self.hosted: dict[TopicPartition, Hosted] = {}
        self.zk = ZkClient(
            self.kernel, self.net, cluster.zk, broker_id, self._on_watch, self._on_expired
        )
        self.fetcher = Fetcher(self)
        self.leader = LeaderSide(self)
        self.live_brokers: set[int] = set()
        self.leaders: dict[TopicPartition, tuple[int, int]] = {}
        self.controller_epoch = 0
        self.broker_epoch = -1
        self.has_leader_and_isr = False
        self.propagation = IsrChangePropagation(0)

    # ---- life ----------------------------------------------------------------------------

    def start(self) -> None:
        super().start()
        self.hosted = {}
        self.leader.clear()
        self.live_brokers, self.leaders = set(), {}
        self.controller_epoch, self.broker_epoch, self.has_leader_and_isr = 0, -1, False
        self.fetcher.clear()
        now = self.kernel.now
        self.propagation = IsrChangePropagation(now, blackout_ms=500, max_delay_ms=5000)
        rng = self.cluster.rng
        self.every(self.cfg.lag_ms // 2, rng.randrange(self.cfg.lag_ms // 2), self._isr_expiration)
        self.every(500, rng.randrange(500), self._propagate_isr_changes)
        self.every(self.cfg.checkpoint_ms, rng.randrange(200), self._checkpoint_hw)
        self.every(self.cfg.flush_ms, rng.randrange(self.cfg.flush_ms), self._flush)
        self.zk.connect(self._register)

    def crash(self, power_loss: bool) -> None:
        """Kill the process; with `power_loss`, every unflushed byte is gone too."""
        self.stop()
        self.zk.drop()
        self.cluster.zk.abandon(self.id)
        self.fetcher.clear()
        self.hosted = {}
        for tp, store in self.disk.stores.items():
            if power_loss:
                store.crash()
            shadow = self.disk.shadows[tp]
            leo = self._open_log(store).log_end_offset
            if leo < len(shadow):
                self.checker.on_power_loss(self.id, tp, shadow[leo:])
                del shadow[leo:]

    # ---- ZooKeeper: registration and session -----------------------------------------------

    def _register(self) -> None:
        self.zk.run(self._register_task(self.zk.session))

    def _register_task(self, session: int) -> ZkTaskGen:
        path = f"/brokers/ids/{self.id}"
        created = yield Create(path, self.id, ephemeral=True)
        if created is ZkErr.SESSION_EXPIRED:
            return
        stat = yield Get(path)
        if isinstance(stat, Stat) and stat.ephemeral_owner == session:
            self.broker_epoch = stat.czxid
        elif stat is not ZkErr.SESSION_EXPIRED:
            # Held by our previous (dead) session until it expires: retry (KAFKA-7165).
            self.later(250, self._register)

    def _on_expired(self) -> None:
        self.kernel.note(f"broker {self.id}: ZooKeeper session expired; re-registering")
        self.zk.connect(self._register)

    def _on_watch(self, path: str) -> None:
        pass  # brokers set no watches in ZooKeeper mode; the controller tells them

    # ---- messages --------------------------------------------------------------------------

    def on_message(self, src: int, msg: Any) -> None:
        if src == 0:
            self.zk.on_message(msg)
        elif isinstance(msg, FetchRequest):
            self.leader.on_fetch(src, msg)
        elif isinstance(msg, ProduceRequest):
            self.leader.on_produce(src, msg)
        elif isinstance(msg, LeaderAndIsrRequest):
            self._on_leader_and_isr(src, msg)
        elif isinstance(msg, UpdateMetadataRequest):
            self._on_update_metadata(src, msg)
        elif isinstance(msg, EpochRequest):
            self.leader.on_epoch_request(src, msg)
        elif isinstance(msg, ListOffsetsRequest):
            self.leader.on_list_offsets(src, msg)
        elif isinstance(msg, MetadataRequest):
            leaders = tuple((tp, ld, ep) for tp, (ld, ep) in self.leaders.items())
            self.respond(src, MetadataResponse(msg.req_id, leaders))
        else:
            self.take_response(msg)

    # ---- control (reference §3.3, §3.4) ---------------------------------------------------

    def _control_error(self, controller_epoch: int, broker_epoch: int | None) -> ErrorCode:
        if broker_epoch is not None and 0 <= broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    def _on_leader_and_isr(self, src: int, req: LeaderAndIsrRequest) -> None:
        error = self._control_error(req.controller_epoch, req.broker_epoch)
        if error is ErrorCode.NONE:
            for tp, state in req.states:
                if self.id in state.replicas:
                    hosted = self._get_or_create(tp)
                    if state.leader_epoch > hosted.partition.leader_epoch:
                        if state.leader == self.id:
                            self._make_leader(tp, hosted, state)
                        else:
                            self._make_follower(tp, hosted, state)
            self.has_leader_and_isr = True
        self.respond(src, ControlResponse(req.req_id, error))

    def _make_leader(self, tp: TopicPartition, hosted: Hosted, state: PartitionState) -> None:
        self.fetcher.remove(tp)
        was_leader = hosted.partition.is_leader
        hosted.partition.make_leader(state, hosted.log, self.kernel.now)
        self.kernel.note(
            f"broker {self.id} leads {tp} epoch {state.leader_epoch} ISR {sorted(state.isr)}, "
            f"LEO {hosted.log.log_end_offset} HW {hosted.partition.high_watermark}"
        )
        self.checker.on_make_leader(self, tp, hosted, was_leader)
        self.leader.partition_changed(tp)

    def _make_follower(self, tp: TopicPartition, hosted: Hosted, state: PartitionState) -> None:
        if state.leader not in self.live_brokers:
            return  # pitfall 17: skipped until a LeaderAndIsr names a live leader
        self.fetcher.remove(tp)
        hosted.partition.make_follower(state)
        self.kernel.note(
            f"broker {self.id} follows {state.leader} for {tp} epoch {state.leader_epoch}, "
            f"LEO {hosted.log.log_end_offset} HW {hosted.partition.high_watermark}"
        )
        self.leader.partition_changed(tp)
        # Every epoch change starts with truncation (KAFKA-7164), from the local HW.
        self.fetcher.add(tp, state.leader, state.leader_epoch, hosted.partition.high_watermark)

    def _get_or_create(self, tp: TopicPartition) -> Hosted:
        hosted = self.hosted.get(tp)
        if hosted is None:
            store = self.disk.stores.setdefault(tp, MemorySegmentStore())
            shadow = self.disk.shadows.setdefault(tp, [])
            log = self._open_log(store)
            assert log.log_end_offset == len(shadow), "shadow out of step with the log"
            p = Partition(
                tp,
                self.id,
                self.cfg.lag_ms,
                min_insync_replicas=MIN_INSYNC_REPLICAS,
                planted_bug=self.cfg.bug,
            )
            p.initialize_high_watermark(self.disk.hw_checkpoint.get(tp, 0), log)
            hosted = self.hosted[tp] = Hosted(p, log, shadow)
        return hosted

    def _open_log(self, store: MemorySegmentStore) -> Log:
        # A small index interval: reads find their batch with fewer header parses.
        return Log(store, segment_bytes=self.cfg.segment_bytes, index_interval_bytes=256)

    def _on_update_metadata(self, src: int, req: UpdateMetadataRequest) -> None:
        error = self._control_error(req.controller_epoch, None)
        if error is ErrorCode.NONE:
            self.live_brokers = set(req.live_brokers)
            for tp, state in req.states:
                self.leaders[tp] = (state.leader, state.leader_epoch)
        self.respond(src, ControlResponse(req.req_id, error))

    # ---- periodic tasks and the ISR write (reference §2.7, §3.1, §3.2, §3.5) ----------------

    def _isr_expiration(self) -> None:
        now = self.kernel.now
        for tp, hosted in self.hosted.items():
            p = hosted.partition
            busy = p.isr_change_in_flight is not None
            proposal = p.maybe_shrink_isr(hosted.log.log_end_offset, now)
            if p.is_leader and not busy:
                self.checker.on_shrink_decision(self, tp, hosted, proposal)
            if proposal is not None:
                self._write_isr(proposal)

    def _write_isr(self, proposal: ProposeIsr) -> None:
        self.kernel.note(
            f"broker {self.id} proposes ISR {list(proposal.new_state.isr)} for {proposal.tp} "
            f"({proposal.kind} {sorted(proposal.changed)}, zkVersion "
            f"{proposal.expected_zk_version})"
        )
        self.zk.run(self._write_isr_task(proposal))

    def _write_isr_task(self, proposal: ProposeIsr) -> ZkTaskGen:
        """The leader's conditional write; a BADVERSION whose stored state is what we meant to
        write counts as success (our own write, resent after a lost answer)."""
        path = state_path(proposal.tp)
        intended = proposal.new_state
        result = yield SetData(path, intended, proposal.expected_zk_version)
        version: int | None = result if isinstance(result, int) else None
        if result is ZkErr.BADVERSION:
            stored = yield Get(path)
            if isinstance(stored, Stat) and _same_state(stored.data, intended):
                version = stored.version
        hosted = self.hosted.get(proposal.tp)
        if hosted is None:
            return
        hw_moved = hosted.partition.apply_isr_write(
            proposal, version, hosted.log.log_end_offset, self.kernel.now
        )
        self.kernel.note(
            f"broker {self.id} ISR write for {proposal.tp}: "
            + (f"zkVersion {version}" if version is not None else f"failed ({result})")
            + f", ISR now {sorted(hosted.partition.isr)} HW {hosted.partition.high_watermark}"
        )
        if version is not None:
            self.propagation.record(proposal.tp, self.kernel.now)
        if hw_moved or version is not None:
            self.leader.partition_changed(proposal.tp)

    def _propagate_isr_changes(self) -> None:
        changed = self.propagation.maybe_propagate(self.kernel.now)
        if changed:
            self.zk.run(self._notify_task(tuple(sorted(changed))))

    def _notify_task(self, tps: tuple[TopicPartition, ...]) -> ZkTaskGen:
        result = yield Create("/isr_change_notification/isr_change_", tps, sequential=True)
        if not isinstance(result, str):
            self.propagation.pending.update(tps)  # they go out with the next check

    def _checkpoint_hw(self) -> None:
        # Written atomically (tmp + fsync + rename), so durable at once (reference §3.5).
        if self.has_leader_and_isr:
            for tp, hosted in self.hosted.items():
                self.disk.hw_checkpoint[tp] = hosted.partition.high_watermark

    def _flush(self) -> None:
        # The operating system's write-back: what a power loss cannot take any more.
        for hosted in self.hosted.values():
            hosted.log.flush()


def _same_state(stored: Any, intended: Any) -> bool:
    return (stored.leader, stored.leader_epoch, stored.isr, stored.controller_epoch) == (
        intended.leader,
        intended.leader_epoch,
        intended.isr,
        intended.controller_epoch,
    )
