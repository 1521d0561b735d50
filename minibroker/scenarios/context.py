"""What a scenario function works with: the cluster's chaos backend, the seeded rng, who leads
now (from the ZooKeeper recorder), faults that land in the timeline, and waits that are
conditions with deadlines. A scenario's own expectations are recorded as checks.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from minibroker.chaos import ChaosBackend, NetworkFault, perform, resolve_target
from minibroker.chaos.backend import node_name
from minibroker.runtime.clock import now_ms
from minibroker.runtime.waiting import WaitTimeout, wait_until
from minibroker.runtime.zk_store import ZkStore
from minibroker.scenarios.history import PartitionStateChange
from minibroker.scenarios.timeline import Timeline
from minibroker.scenarios.workload import Workload
from minibroker.scenarios.zk_recorder import ZkRecorder

T = TypeVar("T")


class ScenarioStepFailed(RuntimeError):
    """A step of a scenario could not be carried out; the run goes on to its checks."""


@dataclass(frozen=True)
class Timing:
    """The cluster's timings the waits are derived from."""

    session_timeout_ms: int
    replica_lag_ms: int

    @property
    def wait_s(self) -> float:
        """A generous deadline for one step: session expiry plus an election and a catch-up on
        a loaded 2-core machine."""
        return 20.0 + 3 * self.session_timeout_ms / 1000


@dataclass(frozen=True)
class Check:
    """One expectation of the scenario itself ("the partition stayed offline", "error 19")."""

    ts_ms: int
    name: str
    ok: bool
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


class ScenarioContext:
    """Handed to each scenario function; see the module docstring."""

    def __init__(
        self,
        *,
        topic: str,
        cluster_dir: Path,
        chaos: ChaosBackend,
        rng: random.Random,
        timeline: Timeline,
        recorder: ZkRecorder,
        workload: Workload,
        timing: Timing,
        zk_connect: str = "",
    ) -> None:
        self.topic = topic
        self.cluster_dir = cluster_dir
        self.chaos = chaos
        self.rng = rng
        self.timeline = timeline
        self.recorder = recorder
        self.workload = workload
        self.timing = timing
        self.partitions = workload.partitions
        self.checks: list[Check] = []
        self.network_faulted: set[str] = set()
        self.zk_connect = zk_connect
        self._zk: ZkStore | None = None

    def zk(self) -> ZkStore:
        """A ZooKeeper session of the scenario's own, for the admin writes of the operations
        scenarios (reassignments, configs, deletions); closed by `close`."""
        if self._zk is None:
            self._zk = ZkStore(self.zk_connect, session_timeout_ms=10_000)
            self._zk.start()
        return self._zk

    def close(self) -> None:
        if self._zk is not None:
            self._zk.stop()
            self._zk = None

    # ---- who is who now ----------------------------------------------------------------------

    def resolve(self, alias: str) -> str:
        """The node an alias of the chaos interface means now: leader / follower of partition 0
        (`leader:T-P` for another), or the active controller."""
        return resolve_target(self.chaos, alias, topic=self.topic).name

    def leader(self, partition: int = 0) -> str:
        return self.resolve(f"leader:{self.topic}-{partition}")

    def follower(self, partition: int = 0) -> str:
        return self.resolve(f"follower:{self.topic}-{partition}")

    def controller(self) -> str:
        return self.resolve("controller")

    def state(self, partition: int = 0) -> PartitionStateChange | None:
        return self.recorder.latest(partition)

    def node_id(self, name: str) -> int:
        node_id = self.chaos.node(name).node_id
        if node_id is None:
            raise ScenarioStepFailed(f"{name} has no node id")
        return node_id

    @staticmethod
    def broker_name(broker_id: int) -> str:
        return node_name("broker", broker_id)

    # ---- faults ------------------------------------------------------------------------------

    def act(self, action: str, name: str, why: str = "") -> None:
        """One chaos action (kill, stop, pause, resume, start, restart) on `name`."""
        where = self.chaos.describe(name) if action != "start" else "new process"
        text = f"{action} {name}" + (f" ({why})" if why else "") + f" [{where}]"
        self.timeline.fault(action, name, text)
        perform(self.chaos, action, name)

    def network_fault(self, fault: NetworkFault, why: str = "") -> None:
        """A fault on `fault.name`'s links through the fault proxy."""
        peers = ", ".join(fault.peers) if fault.peers else "every peer"
        detail = {"delay": f" {fault.delay_ms} ms", "throttle": f" {fault.bytes_per_s} B/s"}
        text = f"{fault.kind}{detail.get(fault.kind, '')} {fault.name} <-> {peers}"
        self.network_faulted.add(fault.name)
        links = self.chaos.network_fault(fault)
        text += (f" ({why})" if why else "") + f": {len(links)} link(s)"
        self.timeline.fault(f"net-{fault.kind}", fault.name, text)

    def heal(self, name: str) -> None:
        links = self.chaos.heal_network(name)
        self.network_faulted.discard(name)
        self.timeline.fault("net-heal", name, f"heal {name}: {len(links)} link(s)")

    # ---- waiting -----------------------------------------------------------------------------

    def wait(
        self, condition: Callable[[], T | None], what: str, timeout_s: float | None = None
    ) -> T:
        """Poll `condition` until truthy; ScenarioStepFailed after the deadline."""
        try:
            return wait_until(
                condition, timeout_s=timeout_s or self.timing.wait_s, what=what, interval_s=0.02
            )
        except WaitTimeout as exc:
            raise ScenarioStepFailed(str(exc)) from None

    def after(self, seconds: float) -> None:
        """Let `seconds` pass: a fault schedule's timing ("kill 1.1 s after the pause"), never
        a way to wait for an effect (use `wait` for that)."""
        time.sleep(seconds)

    def hold(self, condition: Callable[[], bool], seconds: float, what: str) -> bool:
        """Watch `condition` stay true for `seconds` (an observation, not a synchronisation);
        records a check and returns whether it held."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if not condition():
                return self.expect(False, f"{what} for {seconds:.1f} s", "it stopped holding")
            time.sleep(0.02)
        return self.expect(True, f"{what} for {seconds:.1f} s")

    def expect(self, ok: bool, name: str, message: str = "", **evidence: Any) -> bool:
        check = Check(now_ms(), name, ok, message or ("ok" if ok else "not met"), evidence)
        self.checks.append(check)
        self.timeline.add("check", "scenario", "ok" if ok else "FAILED", f"{name}: {check.message}")
        return ok

    def wait_acks(self, more: int = 30, partitions: Iterable[int] | None = None) -> None:
        """Until `more` further records were acknowledged (on these partitions, else any)."""
        wanted = list(self.partitions if partitions is None else partitions)
        counts = self.workload.acked_by_partition
        start = sum(counts[p] for p in wanted)
        self.wait(
            lambda: sum(counts[p] for p in wanted) >= start + more,
            f"{more} more acknowledged records on partitions {wanted}",
        )

    def wait_unregistered(self, broker_id: int) -> None:
        """Until /brokers/ids/<id> is gone (a killed broker's session expired)."""
        self.wait(
            lambda: broker_id not in self.recorder.registered(),
            f"broker {broker_id}'s registration to go",
        )

    def wait_registered(self, broker_id: int) -> None:
        self.wait(
            lambda: broker_id in self.recorder.registered(), f"broker {broker_id} to register"
        )

    def wait_new_leader(self, partition: int, old: int) -> int:
        """Until the partition has a leader other than `old`; returns it."""

        def new_leader() -> int | None:
            s = self.state(partition)
            return s.leader if s is not None and s.leader >= 0 and s.leader != old else None

        return self.wait(new_leader, f"a leader of {self.topic}-{partition} other than {old}")

    def wait_in_isr(self, broker_id: int, partitions: Iterable[int] | None = None) -> None:
        """Until the broker is in the ISR of the given partitions (default: all)."""
        wanted = list(self.partitions if partitions is None else partitions)

        def back() -> bool:
            states = [self.state(p) for p in wanted]
            return all(s is not None and broker_id in s.isr for s in states)

        self.wait(back, f"broker {broker_id} in the ISR of partitions {wanted}")

    def wait_controller_other_than(self, old: int) -> int:
        def other() -> int | None:
            cid = self.recorder.controller_id()
            return cid if cid is not None and cid != old else None

        return self.wait(other, f"a controller other than {old}")
