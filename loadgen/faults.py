"""Faults injected during a load run: parsing `--fault "at=10s kill leader"` and a driver thread
that carries each one out on the process-mode cluster at its offset from the start of the load
(the first records reaching the topic: Spark takes seconds to get there, which must not eat
into the offsets).

Targets are resolved when the fault fires, not when it is parsed: `leader` is whoever leads
partition 0 of the topic at that moment (from its state znode), `follower` its last in-sync
follower, `controller` the active controller. `resume`/`restart` of an alias reuse the process
the alias last resolved to, so "pause leader" then "resume leader" resumes the broker that was
paused, not the new leader.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from minibroker.core.types import TopicPartition
from minibroker.localcluster import ClusterError, ClusterState, restart, send, zk_session
from minibroker.runtime.clock import monotonic_ms, now_ms
from minibroker.runtime.zk_store import ZkError

ACTIONS = ("kill", "stop", "pause", "resume", "restart")
ALIASES = ("leader", "follower", "controller")
_FAULT = re.compile(r"at=(?P<at>\d+(?:\.\d+)?)(?P<unit>ms|s)\s+(?P<action>\S+)\s+(?P<target>\S+)")
_PROCESS = re.compile(r"(broker|controller)-\d+")


class FaultError(ValueError):
    """A --fault that cannot be parsed or carried out; the message says which and why."""


@dataclass(frozen=True)
class Fault:
    """`action` on `target` at `at_s` seconds after the load started."""

    at_s: float
    action: str
    target: str
    text: str


def parse_fault(text: str) -> Fault:
    """Parse "at=10s kill leader", "at=1.5s pause broker-2", "at=500ms resume controller"."""
    m = _FAULT.fullmatch(text.strip())
    if m is None:
        raise FaultError(
            f"bad --fault {text!r}: expected 'at=<seconds>s <action> <target>', "
            "e.g. 'at=10s kill leader'"
        )
    action, target = m["action"], m["target"]
    if action not in ACTIONS:
        raise FaultError(f"bad --fault {text!r}: action must be one of {', '.join(ACTIONS)}")
    if target not in ALIASES and not _PROCESS.fullmatch(target):
        raise FaultError(
            f"bad --fault {text!r}: target must be broker-N, controller-N, leader, follower or "
            "controller"
        )
    at_s = float(m["at"]) / (1000 if m["unit"] == "ms" else 1)
    return Fault(at_s=at_s, action=action, target=target, text=text.strip())


def parse_faults(texts: Sequence[str]) -> list[Fault]:
    """Every --fault, in the order they fire (ties keep the order given)."""
    return sorted((parse_fault(t) for t in texts), key=lambda f: f.at_s)


@dataclass(frozen=True)
class ExecutedFault:
    """What the driver did: the process a fault hit (None if it could not be resolved), the
    wall-clock time it was carried out and its offset from the start, and any error."""

    text: str
    action: str
    target: str
    process: str | None
    planned_s: float
    wall_ms: int
    offset_s: float
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


# ---- resolving targets ---------------------------------------------------------------------------


def resolve_target(state: ClusterState, topic: str, target: str) -> str:
    """The process name a target means right now (reads ZooKeeper for the aliases)."""
    if target not in ALIASES:
        state.process(target)  # raises ClusterError naming the processes that exist
        return target
    with zk_session(state.zk_connect) as zk:
        if target == "controller":
            node_id, role = zk.read_controller(), "controller"
            what = "no controller is elected"
        else:
            leader_and_isr = zk.read_partition_state(TopicPartition(topic, 0))
            node_id = None if leader_and_isr is None else leader_and_isr.leader
            role, what = "broker", f"partition 0 of topic {topic!r} has no leader"
            if target == "follower" and leader_and_isr is not None:
                # The last in-sync follower of partition 0: pausing it shows a shrink/expand.
                followers = [b for b in leader_and_isr.isr if b != leader_and_isr.leader]
                node_id = followers[-1] if followers else None
                what = f"partition 0 of topic {topic!r} has no in-sync follower"
    for p in state.by_role(role):
        if p.id == node_id:
            return p.name
    raise ClusterError(what if node_id is None or node_id < 0 else f"{role} {node_id} is unknown")


def perform(state: ClusterState, action: str, name: str) -> None:
    if action == "restart":
        restart(state, name)
    else:
        send(state, name, action)


# ---- the driver ----------------------------------------------------------------------------------


class FaultDriver(threading.Thread):
    """Carries the faults out at their offsets from the moment `load_started()` first returns
    True (polled; None: from `start()`); `stop()` ends it early (faults not yet due are
    skipped). Each executed fault is printed and kept in `executed`."""

    POLL_S = 0.2

    def __init__(
        self,
        faults: Sequence[Fault],
        cluster_dir: Path,
        topic: str,
        *,
        load_started: Callable[[], bool] | None = None,
        say: Callable[[str], None] = print,
    ) -> None:
        super().__init__(name="loadgen-faults", daemon=True)
        self.faults = list(faults)
        self.cluster_dir = cluster_dir
        self.topic = topic
        self.executed: list[ExecutedFault] = []
        self._load_started = load_started
        self._say = say
        self._stopping = threading.Event()
        self._resolved: dict[str, str] = {}
        self._start_ms = monotonic_ms()

    def stop(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout=30)

    def run(self) -> None:
        if not self.faults:
            return
        if self._load_started is not None:
            while not self._load_started():
                if self._stopping.wait(self.POLL_S):
                    return
            self._say("loadgen: the first records are in the topic: the fault clock starts")
        self._start_ms = monotonic_ms()
        for fault in self.faults:
            delay_s = fault.at_s - (monotonic_ms() - self._start_ms) / 1000
            if self._stopping.wait(max(0.0, delay_s)):
                return
            self.executed.append(self._execute(fault))

    def _execute(self, fault: Fault) -> ExecutedFault:
        process: str | None = None
        error: str | None = None
        try:
            # Reloaded every time: a restart records the new PID in the state file.
            state = ClusterState.load(self.cluster_dir)
            process = self._process_for(state, fault)
            perform(state, fault.action, process)
        except (ClusterError, ZkError, OSError) as exc:
            error = " ".join(str(exc).split()) or type(exc).__name__
        done = ExecutedFault(
            text=fault.text,
            action=fault.action,
            target=fault.target,
            process=process,
            planned_s=fault.at_s,
            wall_ms=now_ms(),
            offset_s=round((monotonic_ms() - self._start_ms) / 1000, 3),
            error=error,
        )
        outcome = f"failed: {error}" if error else "done"
        self._say(
            f"loadgen: fault at {done.offset_s:.1f} s: {fault.action} {fault.target}"
            f"{f' ({process})' if process and process != fault.target else ''} {outcome}"
        )
        return done

    def _process_for(self, state: ClusterState, fault: Fault) -> str:
        if fault.action in ("resume", "restart") and fault.target in self._resolved:
            return self._resolved[fault.target]
        name = resolve_target(state, self.topic, fault.target)
        if fault.target in ALIASES:
            self._resolved[fault.target] = name
        return name
