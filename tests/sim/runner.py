"""Build a cluster from a seed, run its schedule, and report: one schedule, or many in a row.

A failing schedule reports the seed, the invariant, the event index and time, the last events
and the one command that replays it.
"""

from __future__ import annotations

import random
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field

from minibroker.core.planted_bugs import PlantedBug
from tests.sim.broker import SimBroker
from tests.sim.clients import SimConsumer, SimProducer
from tests.sim.config import (
    CONSUMER_ID,
    CONTROLLER_IDS,
    PRODUCER_ID,
    TOPIC,
    SimConfig,
    make_config,
)
from tests.sim.controller import SimController
from tests.sim.faults import Nemesis
from tests.sim.invariants import Checker
from tests.sim.kernel import TRACE_LENGTH, ZK_NODE, Kernel, Violation
from tests.sim.network import Network
from tests.sim.zk import ZkServer


class Cluster:
    def __init__(
        self, cfg: SimConfig, trace_length: int = TRACE_LENGTH, paranoid: bool = False
    ) -> None:
        self.cfg = cfg
        self.kernel = Kernel(trace_length)
        self.rng = random.Random(f"cluster-{cfg.seed}")
        self.net = Network(
            self.kernel,
            random.Random(f"network-{cfg.seed}"),
            delay_ms=cfg.net_delay_ms,
            spike_rate=cfg.net_spike_rate,
            spike_ms=cfg.net_spike_ms,
            drop_rate=cfg.net_drop_rate,
        )
        self.zk = ZkServer(self.kernel, self.net, cfg.session_timeout_ms)
        self.net.add(ZK_NODE, self.zk)
        self.brokers: dict[int, SimBroker] = {}
        self.checker = Checker(self, paranoid)
        self.brokers = {b: SimBroker(self, b) for b in cfg.brokers}
        self.controllers = {c: SimController(self, c) for c in CONTROLLER_IDS}
        self.producer = SimProducer(self, PRODUCER_ID)
        self.consumer = SimConsumer(self, CONSUMER_ID)
        self.nemesis = Nemesis(self)
        self.zk.on_change = self.checker.on_zk_change
        self.kernel.after_event = self.checker.after_event
        # What an administrator created before the run: the persistent paths and the topic.
        for path in ("/brokers", "/brokers/ids", "/brokers/topics", "/isr_change_notification"):
            self.zk.seed(path)
        self.zk.seed("/controller_epoch", 0)
        self.zk.seed(f"/brokers/topics/{TOPIC}", dict(cfg.assignments))
        self.zk.seed(f"/brokers/topics/{TOPIC}/partitions")
        for tp in cfg.partitions:
            self.zk.seed(f"/brokers/topics/{TOPIC}/partitions/{tp.partition}")

    def start(self) -> None:
        processes = [*self.brokers.values(), *self.controllers.values()]
        for p in processes:
            self.kernel.after(self.rng.randrange(100), p.id, p.start)
        for client in (self.producer, self.consumer):
            self.kernel.after(200 + self.rng.randrange(100), client.id, client.start)
        self.nemesis.start()

    def run(self) -> None:
        self.kernel.run(self.kernel.start_ms + self.cfg.end_ms)


def replay_command(seed: int, bug: PlantedBug, brokers: int | None) -> str:
    parts = ["python -m tests.sim", f"--seed {seed}"]
    if bug.enabled:
        parts.append(f"--bug {bug.value}")
    if brokers is not None:
        parts.append(f"--brokers {brokers}")
    return " ".join(parts)


@dataclass
class Outcome:
    seed: int
    bug: PlantedBug
    brokers: int | None
    events: int
    sim_ms: int
    stats: dict[str, int]
    invariant: str | None = None  # set when the schedule failed
    detail: str = ""
    trace: list[str] = field(default_factory=list)

    @property
    def failed(self) -> bool:
        return self.invariant is not None

    @property
    def replay(self) -> str:
        return replay_command(self.seed, self.bug, self.brokers)

    def report(self) -> str:
        if not self.failed:
            return (
                f"seed {self.seed}: ok, {self.events} events, {self.sim_ms} simulated ms, "
                f"{self.stats}"
            )
        lines = [
            f"seed {self.seed}: VIOLATION of {self.invariant} at event #{self.events} "
            f"(t={self.sim_ms} ms)",
            f"  {self.detail}",
            "  last events:",
            *(f"    {line}" for line in self.trace),
            f"  replay: {self.replay}",
        ]
        return "\n".join(lines)


def run_schedule(
    seed: int,
    bug: PlantedBug = PlantedBug.NONE,
    brokers: int | None = None,
    trace_length: int = TRACE_LENGTH,
    paranoid: bool = False,
) -> Outcome:
    """Run one schedule; `paranoid` checks every partition after every event (slow)."""
    cluster = Cluster(make_config(seed, bug, brokers), trace_length, paranoid)
    kernel = cluster.kernel
    invariant: str | None = None
    detail = ""
    try:
        cluster.start()
        cluster.run()
    except Violation as v:
        invariant, detail = v.invariant, v.detail
    except Exception as exc:  # a rule's own assertion, or a bug in the simulation: both fail
        invariant = f"crash ({type(exc).__name__})"
        detail = "".join(traceback.format_exception(exc)[-6:]).rstrip()
    sim_ms = kernel.now - kernel.start_ms
    outcome = Outcome(
        seed, bug, brokers, kernel.index, sim_ms, dict(cluster.checker.stats), invariant
    )
    if invariant is not None:
        outcome.detail = detail
        outcome.trace = kernel.format_trace(trace_length)
    return outcome


@dataclass
class Summary:
    schedules: int = 0
    events: int = 0
    seconds: float = 0.0  # wall clock
    cpu_seconds: float = 0.0  # this process's CPU time: the machine may be shared
    failures: list[Outcome] = field(default_factory=list)

    @property
    def per_second(self) -> float:
        return self.schedules / self.seconds if self.seconds else 0.0

    @property
    def per_cpu_second(self) -> float:
        return self.schedules / self.cpu_seconds if self.cpu_seconds else 0.0


def run_many(
    first_seed: int,
    count: int,
    bug: PlantedBug = PlantedBug.NONE,
    brokers: int | None = None,
    *,
    stop_at_first: bool = False,
    time_budget_s: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Summary:
    summary = Summary()
    started, cpu_started = time.perf_counter(), time.process_time()
    for seed in range(first_seed, first_seed + count):
        outcome = run_schedule(seed, bug, brokers)
        summary.schedules += 1
        summary.events += outcome.events
        if progress is not None and summary.schedules % 100 == 0:
            progress(summary.schedules, len(summary.failures))
        if outcome.failed:
            summary.failures.append(outcome)
            if stop_at_first:
                break
        if time_budget_s is not None and time.perf_counter() - started > time_budget_s:
            break
    summary.seconds = time.perf_counter() - started
    summary.cpu_seconds = time.process_time() - cpu_started
    return summary
