"""ZooKeeper's history during a run: every version of the partition state znodes, /controller
(with /controller_epoch) and /brokers/ids, from watches backed by a 20 ms poll. Versions, the
epoch and the children's cversion show changes that fell between two reads: recorded as gaps."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from functools import partial

from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    BrokerIdsZNode,
    BrokerIdZNode,
    ControllerEpochZNode,
    ControllerZNode,
    TopicPartitionStateZNode,
    ZNodeFormatError,
)
from minibroker.runtime.clock import now_ms
from minibroker.runtime.zk_store import Stat, ZkError, ZkNoNode, ZkStore
from minibroker.scenarios.history import (
    BrokersChange,
    ControllerChange,
    History,
    PartitionStateChange,
    ZkGap,
)
from minibroker.scenarios.timeline import Timeline

POLL_S = 0.02


class ZkTracker:
    """The pure part: turns observations (which may repeat, or skip versions) into the
    history's changes and gaps. Not thread-safe; the recorder serialises calls."""

    def __init__(self, history: History, timeline: Timeline | None = None) -> None:
        self.history = history
        self.timeline = timeline
        self.states: dict[int, PartitionStateChange] = {}
        self.controller: ControllerChange | None = None
        self.brokers: BrokersChange | None = None
        self.brokers_cversion = -1

    def _gap(self, ts_ms: int, path: str, after: int, seen: int) -> None:
        gap = ZkGap(ts_ms, path, after, seen)
        self.history.zk_gaps.append(gap)
        if self.timeline is not None:
            self.timeline.add(
                "note", "zk-recorder", "gap", f"missed {gap.missed} version(s) of {path}", ts_ms
            )

    def observe_state(self, partition: int, state: LeaderAndIsr | None, ts_ms: int) -> None:
        """A read of the partition's state znode (None: it does not exist)."""
        version = -1 if state is None else state.zk_version
        last = self.states.get(partition)
        if last is not None and (version == last.zk_version or 0 <= version < last.zk_version):
            return  # seen already, or an older read arriving late
        if last is None and state is None:
            return
        path = TopicPartitionStateZNode.path(TopicPartition(self.history.topic, partition))
        after = last.zk_version if last is not None else -1
        if state is not None and version > after + 1 and last is not None:
            self._gap(ts_ms, path, after, version)
        change = PartitionStateChange(
            ts_ms=ts_ms,
            partition=partition,
            zk_version=version,
            leader=state.leader if state is not None else -1,
            leader_epoch=state.leader_epoch if state is not None else -1,
            isr=tuple(state.isr) if state is not None else (),
            controller_epoch=state.controller_epoch if state is not None else -1,
        )
        self.states[partition] = change
        self.history.states.append(change)
        if self.timeline is not None:
            text = (
                f"{self.history.tp_name(partition)} v{version}: leader {change.leader} epoch "
                f"{change.leader_epoch} ISR {list(change.isr)}"
                if state is not None
                else f"{self.history.tp_name(partition)}: state znode gone"
            )
            self.timeline.add("zk", "zookeeper", "partition_state", text, ts_ms)

    def observe_controller(self, controller_id: int | None, epoch: int, ts_ms: int) -> None:
        """/controller's id (None: no controller) and /controller_epoch's value, read together."""
        last = self.controller
        if last is not None:
            if (controller_id, epoch) == (last.controller_id, last.controller_epoch):
                return
            if epoch < last.controller_epoch:
                return  # a late read
            if epoch > last.controller_epoch + 1:
                self._gap(ts_ms, ControllerEpochZNode.path, last.controller_epoch, epoch)
        change = ControllerChange(ts_ms, controller_id, epoch)
        self.controller = change
        self.history.controllers.append(change)
        if self.timeline is not None:
            who = "none" if controller_id is None else str(controller_id)
            self.timeline.add(
                "zk", "zookeeper", "controller", f"/controller {who}, epoch {epoch}", ts_ms
            )

    def observe_brokers(self, brokers: dict[int, int], cversion: int, ts_ms: int) -> None:
        """/brokers/ids: broker id -> broker epoch (czxid), and the parent's cversion, which
        counts every create and delete of a child."""
        last = self.brokers
        if last is not None:
            if cversion <= self.brokers_cversion:
                return
            old, new = last.brokers, brokers
            replaced = {b for b in old.keys() & new.keys() if old[b] != new[b]}
            explained = len(old.keys() ^ new.keys()) + 2 * len(replaced)
            missed = cversion - self.brokers_cversion - explained
            if missed > 0:
                self._gap(ts_ms, BrokerIdsZNode.path, cversion - missed - 1, cversion)
        self.brokers_cversion = cversion
        if last is not None and brokers == last.brokers:
            return
        change = BrokersChange(ts_ms, dict(sorted(brokers.items())), cversion)
        self.brokers = change
        self.history.brokers.append(change)
        if self.timeline is not None:
            self.timeline.add(
                "zk", "zookeeper", "brokers", f"/brokers/ids {sorted(brokers)}", ts_ms
            )


class ZkRecorder:
    """Runs a ZkTracker on its own ZooKeeper session: watches plus a poll thread."""

    def __init__(
        self, zk_connect: str, history: History, timeline: Timeline, partitions: int
    ) -> None:
        self.tracker = ZkTracker(history, timeline)
        self.partitions = partitions
        self._zk = ZkStore(zk_connect, session_timeout_ms=10_000)
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zk-recorder", daemon=True)
        self.errors = 0

    def _locked(self, fn: Callable[[], None]) -> None:
        with self._lock:
            fn()

    def start(self) -> None:
        self._zk.start()
        topic = self.tracker.history.topic
        for p in range(self.partitions):
            path = TopicPartitionStateZNode.path(TopicPartition(topic, p))
            self._zk.watch_data(path, self._on_state(p))
        self._zk.watch_children(BrokerIdsZNode.path, lambda _children: self._wake.set())
        self._zk.watch_data(ControllerZNode.path, lambda _d, _s: self._wake.set())
        self._thread.start()

    def _on_state(self, partition: int) -> Callable[[bytes | None, Stat | None], None]:
        def on_change(data: bytes | None, stat: Stat | None) -> None:
            state = _decode_state(data, stat)
            ts = stat.mtime_ms if stat is not None and stat.mtime_ms else now_ms()
            self._locked(lambda: self.tracker.observe_state(partition, state, ts))

        return on_change

    def latest(self, partition: int) -> PartitionStateChange | None:
        """The partition's state as last seen (None: never seen)."""
        with self._lock:
            return self.tracker.states.get(partition)

    def registered(self) -> dict[int, int]:
        """Registered broker id -> broker epoch, as last seen."""
        with self._lock:
            last = self.tracker.brokers
            return dict(last.brokers) if last is not None else {}

    def controller_id(self) -> int | None:
        with self._lock:
            last = self.tracker.controller
            return last.controller_id if last is not None else None

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll_once()
            except (ZkError, ZNodeFormatError):
                self.errors += 1
            self._wake.wait(POLL_S)
            self._wake.clear()

    def poll_once(self) -> None:
        topic = self.tracker.history.topic
        for p in range(self.partitions):
            got = self._zk.get_or_none(TopicPartitionStateZNode.path(TopicPartition(topic, p)))
            state = _decode_state(*got) if got is not None else None
            ts = got[1].mtime_ms if got is not None and got[1].mtime_ms else now_ms()
            self._locked(partial(self.tracker.observe_state, p, state, ts))
        controller = self._zk.get_or_none(ControllerZNode.path)
        epoch = self._zk.read_controller_epoch()
        cid = ControllerZNode.decode(controller[0]) if controller is not None else None
        ts = controller[1].ctime_ms if controller is not None else now_ms()
        if epoch is not None:
            self._locked(lambda: self.tracker.observe_controller(cid, epoch[0], ts))
        with contextlib.suppress(ZkNoNode):
            children, stat = self._zk.children_with_stat(BrokerIdsZNode.path)
            brokers = {}
            for child in children:
                node = self._zk.exists(BrokerIdZNode.path(int(child)))
                if node is not None:
                    brokers[int(child)] = node.czxid
            self._locked(lambda: self.tracker.observe_brokers(brokers, stat.cversion, now_ms()))

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
        with contextlib.suppress(ZkError):
            self._zk.stop()


def _decode_state(data: bytes | None, stat: Stat | None) -> LeaderAndIsr | None:
    if data is None or stat is None:
        return None
    try:
        return TopicPartitionStateZNode.decode(data, stat.version)
    except ZNodeFormatError:
        return None
