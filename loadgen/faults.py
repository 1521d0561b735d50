"""Faults injected during a load run: parsing `--fault "at=10s kill leader"` and a driver thread
that carries each one out through the chaos interface (a process-mode or a compose cluster) at
its offset from the start of the load: the first records reaching the topic, since Spark takes
seconds to get there, which must not eat into the offsets.

Targets are resolved when the fault fires (minibroker.chaos.targets). `resume`, `start` and
`restart` of an alias reuse the node the alias last resolved to, so "pause leader" then "resume
leader" resumes the broker that was paused, not the new leader.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from minibroker.chaos import (
    ACTIONS,
    ChaosBackend,
    ReaderFactory,
    is_alias,
    perform,
    resolve_target,
)
from minibroker.localcluster import ClusterError
from minibroker.runtime.clock import monotonic_ms, now_ms
from minibroker.runtime.zk_store import ZkError

_FAULT = re.compile(r"at=(?P<at>\d+(?:\.\d+)?)(?P<unit>ms|s)\s+(?P<action>\S+)\s+(?P<target>\S+)")
_PROCESS = re.compile(r"(broker|controller)-\d+")
# Actions that act on the node an alias last meant rather than whoever it means now.
_REUSE = ("resume", "start", "restart")


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
    if not is_alias(target) and not _PROCESS.fullmatch(target):
        raise FaultError(
            f"bad --fault {text!r}: target must be broker-N, controller-N, leader, follower, "
            "controller or leader:TOPIC-P / follower:TOPIC-P"
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


# ---- the driver ----------------------------------------------------------------------------------


class FaultDriver(threading.Thread):
    """Carries the faults out on `backend` (None only without faults) at their offsets from
    the moment `load_started()` first returns True (polled; None: from `start()`); `stop()`
    ends it early (faults not yet due are skipped, but those that bring a process back run).
    Each executed fault is printed and kept in `executed`. `open_reader` replaces ZooKeeper for
    resolving aliases (tests)."""

    POLL_S = 0.2

    def __init__(
        self,
        faults: Sequence[Fault],
        backend: ChaosBackend | None,
        topic: str,
        *,
        load_started: Callable[[], bool] | None = None,
        say: Callable[[str], None] = print,
        open_reader: ReaderFactory | None = None,
    ) -> None:
        super().__init__(name="loadgen-faults", daemon=True)
        if faults and backend is None:
            raise ValueError("faults need a chaos backend to act through")
        self.faults = list(faults)
        self.backend = backend
        self.topic = topic
        self._open_reader = open_reader
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
        for i, fault in enumerate(self.faults):
            delay_s = fault.at_s - (monotonic_ms() - self._start_ms) / 1000
            if self._stopping.wait(max(0.0, delay_s)):
                self._bring_back(self.faults[i:])
                return
            self.executed.append(self._execute(fault))

    def _bring_back(self, left: Sequence[Fault]) -> None:
        """The load ended before these were due: the ones that bring a process back (resume,
        start, restart) still run, at once, so that a run never leaves the cluster broken
        because its load was faster than planned; the others are skipped."""
        if self.executed:
            for fault in left:
                if fault.action in _REUSE:
                    self.executed.append(self._execute(fault))

    def _execute(self, fault: Fault) -> ExecutedFault:
        process: str | None = None
        error: str | None = None
        assert self.backend is not None  # checked in __init__: there are faults
        try:
            process = self._process_for(self.backend, fault)
            perform(self.backend, fault.action, process)
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

    def _process_for(self, backend: ChaosBackend, fault: Fault) -> str:
        if fault.action in _REUSE and fault.target in self._resolved:
            return self._resolved[fault.target]
        name = resolve_target(
            backend, fault.target, topic=self.topic, open_reader=self._open_reader
        ).name
        if is_alias(fault.target):
            self._resolved[fault.target] = name
        return name
