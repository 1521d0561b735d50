"""A simulated controller process: the shell of controller/operations.py and state_changes.py
over the real decision functions (controller.logic: election, elections, context, batch).

Controllers race for /controller with Kafka's election multi and fence every write with a
check of /controller_epoch's version (reference §5.1). The active one handles one event at a
time — failover, broker membership change, ISR change notification — reading partition state
afresh before each decision and writing it conditionally (§5.5, §5.6). Requests to each broker
go one at a time, in order, resent until answered (Kafka's RequestSendThread, §5.9).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Iterable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from broker.replication.partition import PartitionState
from controller.logic import election, elections
from controller.logic.batch import RequestBatch
from controller.logic.context import BrokerInfo, ControllerContext
from minibroker.core.types import LeaderAndIsr, TopicPartition
from tests.sim.config import state_path
from tests.sim.messages import (
    Check,
    Children,
    ControlResponse,
    Create,
    Delete,
    Get,
    LeaderAndIsrRequest,
    Multi,
    MultiFailed,
    SetData,
    Stat,
    UpdateMetadataRequest,
    ZkErr,
    ZkOp,
)
from tests.sim.process import Process
from tests.sim.zk import ZkClient, ZkTaskGen

if TYPE_CHECKING:
    from tests.sim.runner import Cluster

MAX_WRITE_ATTEMPTS = 10
RESEND_MS = 300
ISR_CHANGES = "/isr_change_notification"
Decide = Callable[[TopicPartition, LeaderAndIsr], LeaderAndIsr | None]
Sub = Generator[ZkOp, Any, Any]


class ControllerMoved(Exception):
    """A fenced write failed its /controller_epoch check: another controller took over."""


class SimController(Process):
    def __init__(self, cluster: Cluster, controller_id: int) -> None:
        super().__init__(cluster.kernel, cluster.net, controller_id)
        self.cluster = cluster
        self.checker = cluster.checker
        self.zk = ZkClient(
            self.kernel, self.net, cluster.zk, controller_id, self._on_watch, self._on_expired
        )
        self.active = False
        self.ctx = ControllerContext()
        self.events: deque[Callable[[], ZkTaskGen]] = deque()
        self.busy = False
        self.channels: dict[int, deque[Any]] = {}
        self.in_flight: set[int] = set()

    def start(self) -> None:
        super().start()
        self._resign()
        self.zk.connect(self._elect)

    def crash(self) -> None:
        self.stop()
        self.zk.drop()
        self.cluster.zk.abandon(self.id)
        self.active = False

    def on_message(self, src: int, msg: Any) -> None:
        if src == 0:
            self.zk.on_message(msg)
        else:
            self.take_response(msg)

    # ---- election (reference §5.1) ---------------------------------------------------------

    def _elect(self) -> None:
        self.zk.run(self._elect_task())

    def _elect_task(self) -> ZkTaskGen:
        got = yield Get("/controller", watch=True)
        if got is ZkErr.SESSION_EXPIRED or not election.should_try_election(_data(got)):
            return
        epoch = yield Get("/controller_epoch")
        if not isinstance(epoch, Stat):
            return
        new_epoch = election.next_epoch(epoch.data)
        attempt = Multi(
            (
                Create("/controller", self.id, ephemeral=True),
                SetData("/controller_epoch", new_epoch, epoch.version),
            )
        )
        result = yield attempt
        if isinstance(result, list):
            self._become_active(new_epoch, result[1])
            return
        if result is ZkErr.SESSION_EXPIRED:
            return
        # NODEEXISTS or BADVERSION: our own multi, resent after a lost answer, or another's?
        now_controller = yield Get("/controller", watch=True)
        now_epoch = yield Get("/controller_epoch")
        if isinstance(now_epoch, Stat) and election.attempt_was_ours(
            self.id, new_epoch, _data(now_controller), now_epoch.data
        ):
            self._become_active(new_epoch, now_epoch.version)

    def _become_active(self, epoch: int, epoch_zk_version: int) -> None:
        if self.active:
            return
        self.kernel.note(f"controller {self.id} active with epoch {epoch}")
        self.checker.on_controller_active(self.id, epoch)
        self.active = True
        self.ctx = ControllerContext(epoch=epoch, epoch_zk_version=epoch_zk_version)
        self._enqueue(self._failover)

    def _resign(self) -> None:
        self.active = False
        self.events.clear()
        self.busy = False
        self.channels = {}
        self.in_flight = set()

    def _on_expired(self) -> None:
        self._resign()
        self.zk.connect(self._elect)

    def _on_watch(self, path: str) -> None:
        if path == "/controller":
            self.zk.run(self._controller_changed())
        elif path == "/brokers/ids":
            self._enqueue(self._broker_change)
        elif path == ISR_CHANGES:
            self._enqueue(self._isr_change)

    def _controller_changed(self) -> ZkTaskGen:
        got = yield Get("/controller", watch=True)
        current = _data(got)
        role = election.Role.ACTIVE if self.active else election.Role.STANDBY
        if election.must_resign(role, self.id, current):
            self.kernel.note(f"controller {self.id} resigns")
            self._resign()
        if current is None and got is not ZkErr.SESSION_EXPIRED:
            yield from self._elect_task()

    # ---- the event queue -------------------------------------------------------------------

    def _enqueue(self, event: Callable[[], ZkTaskGen]) -> None:
        self.events.append(event)
        self._pump()

    def _pump(self) -> None:
        if self.busy or not self.events or not self.active:
            return
        self.busy = True
        self.zk.run(self._run_event(self.events.popleft()(), self.incarnation))

    def _run_event(self, event: ZkTaskGen, incarnation: int) -> ZkTaskGen:
        try:
            yield from event
        except ControllerMoved:
            self.kernel.note(f"controller {self.id}: controller moved; resigning")
            self._resign()
            self._elect()
        finally:
            if self.incarnation == incarnation and self.alive:
                self.busy = False
                self.later(0, self._pump)

    # ---- reading and writing partition state (controller/state_changes.py) ----------------

    def _read_state(self, tp: TopicPartition) -> Sub:
        got = yield Get(state_path(tp))
        if got is ZkErr.SESSION_EXPIRED:
            raise ControllerMoved
        return replace(got.data, zk_version=got.version) if isinstance(got, Stat) else None

    def _fenced(self, op: Create | SetData | Delete) -> Sub:
        result = yield Multi((Check("/controller_epoch", self.ctx.epoch_zk_version), op))
        if result is ZkErr.SESSION_EXPIRED or (
            isinstance(result, MultiFailed) and result.index == 0
        ):
            raise ControllerMoved
        return result

    def _write_states(self, tps: Iterable[TopicPartition], decide: Decide) -> Sub:
        ctx = self.ctx
        changed: list[TopicPartition] = []
        for tp in tps:
            for _attempt in range(MAX_WRITE_ATTEMPTS):
                fresh = yield from self._read_state(tp)
                if fresh is None or fresh.controller_epoch > ctx.epoch:
                    break
                new = decide(tp, fresh)
                if new is None:
                    ctx.states[tp] = fresh
                    break
                result = yield from self._fenced(SetData(state_path(tp), new, fresh.zk_version))
                if isinstance(result, list):
                    ctx.states[tp] = replace(new, zk_version=result[1])
                    changed.append(tp)
                    break  # otherwise BADVERSION: read again and decide again
        return changed

    def _initialize_new(self, batch: RequestBatch) -> Sub:
        ctx = self.ctx
        for tp in sorted(ctx.assignments):
            if tp in ctx.states:
                continue
            state = elections.initial_state(ctx.assignments[tp], ctx.online(), ctx.epoch)
            if state is None:
                continue
            result = yield from self._fenced(Create(state_path(tp), state))
            if isinstance(result, list):
                ctx.states[tp] = state
            else:
                existing = yield from self._read_state(tp)
                if existing is None:
                    continue
                ctx.states[tp] = existing
            self._send_state(batch, tp)

    def _elect_offline(self, batch: RequestBatch) -> Sub:
        ctx = self.ctx

        def decide(tp: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr | None:
            if fresh.leader in ctx.online():
                return None
            out = elections.offline_election(
                ctx.assignments[tp], fresh, ctx.online(), False, ctx.epoch
            )
            return None if out is None else out.state

        changed = yield from self._write_states(ctx.offline_partitions(), decide)
        for tp in changed:
            self._send_state(batch, tp)
        return changed

    def _remove_from_isr(self, brokers: Iterable[int], batch: RequestBatch) -> Sub:
        ctx = self.ctx
        for b in sorted(brokers):
            tps = [tp for tp in ctx.partitions_on(b) if tp in ctx.states]

            def decide(tp: TopicPartition, fresh: LeaderAndIsr, b: int = b) -> LeaderAndIsr | None:
                return elections.remove_from_isr(fresh, b, ctx.epoch)

            for tp in (yield from self._write_states(tps, decide)):
                self._send_state(batch, tp, exclude=(b,))

    def _send_state(
        self, batch: RequestBatch, tp: TopicPartition, exclude: Iterable[int] = ()
    ) -> None:
        ctx = self.ctx
        live = [b for b in ctx.assignments[tp] if b in ctx.live_brokers and b not in exclude]
        batch.add_leader_and_isr(live, tp, ctx.live_or_shutting_down())

    # ---- events (controller/operations.py) ------------------------------------------------

    def _read_brokers(self) -> Sub:
        kids = yield Children("/brokers/ids", watch=True)
        if not isinstance(kids, tuple):
            raise ControllerMoved
        return {int(name): BrokerInfo(int(name), st.czxid, "sim", 0) for name, st in kids}

    def _failover(self) -> ZkTaskGen:
        ctx = self.ctx
        ctx.live_brokers = yield from self._read_brokers()
        topic = yield Get("/brokers/topics/t")
        if isinstance(topic, Stat):
            ctx.assignments.update(topic.data)
        for tp in sorted(ctx.assignments):
            state = yield from self._read_state(tp)
            if state is not None:
                ctx.states[tp] = state
        first = RequestBatch()
        first.add_update_metadata(ctx.live_or_shutting_down(), [])
        self._send(first)
        batch = RequestBatch()
        for tp in sorted(ctx.states):
            self._send_state(batch, tp)
        yield from self._initialize_new(batch)
        yield from self._elect_offline(batch)
        dead = {b for replicas in ctx.assignments.values() for b in replicas}
        yield from self._remove_from_isr(dead - set(ctx.live_brokers), batch)
        self._send(batch)
        yield from self._isr_change()

    def _broker_change(self) -> ZkTaskGen:
        ctx = self.ctx
        current = yield from self._read_brokers()
        new = set(current) - set(ctx.live_brokers)
        dead = set(ctx.live_brokers) - set(current)
        bounced = {
            b
            for b in set(current) & set(ctx.live_brokers)
            if current[b].epoch > ctx.live_brokers[b].epoch
        }
        if dead or bounced:
            for b in sorted(dead | bounced):
                ctx.live_brokers.pop(b, None)
                self.channels.pop(b, None)  # Kafka removes the dead broker's send queue
                self.in_flight.discard(b)
            batch = RequestBatch()
            lost_leaders = yield from self._elect_offline(batch)
            yield from self._remove_from_isr(dead | bounced, batch)
            if not lost_leaders:
                batch.add_update_metadata(ctx.live_or_shutting_down(), [])
            self._send(batch)
        if new or bounced:
            started = new | bounced
            ctx.live_brokers = dict(current)
            first = RequestBatch()
            first.add_update_metadata(ctx.live_or_shutting_down() - started, [])
            first.add_update_metadata(started, ctx.states)
            self._send(first)
            batch = RequestBatch()
            for b in sorted(started):
                for tp in ctx.partitions_on(b):
                    if tp in ctx.states:
                        batch.add_leader_and_isr([b], tp, ctx.live_or_shutting_down())
            yield from self._initialize_new(batch)
            yield from self._elect_offline(batch)
            self._send(batch)
        ctx.live_brokers = current

    def _isr_change(self) -> ZkTaskGen:
        ctx = self.ctx
        kids = yield Children(ISR_CHANGES, watch=True)
        if not isinstance(kids, tuple) or not kids:
            return
        changed = sorted({tp for _, st in kids for tp in st.data if tp in ctx.assignments})
        for tp in changed:
            state = yield from self._read_state(tp)
            if state is not None:
                ctx.states[tp] = state
        batch = RequestBatch()
        batch.add_update_metadata(ctx.live_or_shutting_down(), changed)
        self._send(batch)
        for name, _ in kids:
            yield from self._fenced(Delete(f"{ISR_CHANGES}/{name}"))

    # ---- sending to brokers (Kafka's ControllerChannelManager) ----------------------------

    def _send(self, batch: RequestBatch) -> None:
        ctx = self.ctx
        if not self.active:
            return
        for b, tps in sorted(batch.leader_and_isr.items()):
            states = tuple(
                (
                    tp,
                    PartitionState(
                        s.leader,
                        s.leader_epoch,
                        s.isr,
                        ctx.assignments[tp],
                        s.zk_version,
                        s.controller_epoch,
                    ),
                )
                for tp in sorted(tps)
                for s in (ctx.states[tp],)
            )
            epoch = ctx.live_brokers[b].epoch if b in ctx.live_brokers else -1
            self._queue(
                b, LeaderAndIsrRequest(self.kernel.next_id(), self.id, ctx.epoch, epoch, states)
            )
        if batch.update_metadata_to:
            live = tuple(sorted(ctx.live_brokers))
            states_um = tuple(
                (tp, ctx.states[tp])
                for tp in sorted(batch.update_metadata_partitions)
                if tp in ctx.states
            )
            for b in sorted(batch.update_metadata_to):
                msg = UpdateMetadataRequest(
                    self.kernel.next_id(), self.id, ctx.epoch, live, states_um
                )
                self._queue(b, msg)

    def _queue(self, broker: int, msg: Any) -> None:
        self.channels.setdefault(broker, deque()).append(msg)
        self._pump_channel(broker)

    def _pump_channel(self, broker: int) -> None:
        queue = self.channels.get(broker)
        if not queue or broker in self.in_flight:
            return
        self.in_flight.add(broker)
        msg = queue[0]
        self.request(broker, msg, lambda r: self._answered(broker, queue, r), RESEND_MS)

    def _answered(self, broker: int, queue: deque[Any], r: ControlResponse | None) -> None:
        if self.channels.get(broker) is not queue:
            return  # the broker was removed, or we resigned
        self.in_flight.discard(broker)
        if r is not None:
            queue.popleft()
        self._pump_channel(broker)


def _data(got: Any) -> Any:
    return got.data if isinstance(got, Stat) else None
