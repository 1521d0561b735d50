"""Running one scenario end to end on a fresh process-mode cluster: produce → faults → heal →
consume and validate → read every replica's files → check the invariants → report. The cluster
is torn down whatever happens (Ctrl-C included) unless the caller asks to keep it.
"""

from __future__ import annotations

import contextlib
import inspect
import random
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker import localcluster
from minibroker.chaos import ChaosError, ProcessBackend
from minibroker.client.admin_zk import create_topic
from minibroker.client.events import Source
from minibroker.localcluster import ClusterError, ClusterState
from minibroker.runtime.clock import now_ms
from minibroker.runtime.logging import parse_line
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import WaitTimeout
from minibroker.scenarios.context import ScenarioContext, ScenarioStepFailed, Timing
from minibroker.scenarios.history import FinalState, History
from minibroker.scenarios.invariants import check_all
from minibroker.scenarios.logfiles import read_offset_checkpoint, read_replica_log
from minibroker.scenarios.report import Report
from minibroker.scenarios.scenario import Scenario
from minibroker.scenarios.timeline import EventText, Timeline, fields_text
from minibroker.scenarios.workload import Traffic, Workload
from minibroker.scenarios.zk_recorder import ZkRecorder

TOPIC = "scenario"
PARTITIONS = 3
REPLICATION_FACTOR = 3
PLANTED_BUG_PROPERTY = "minibroker.test.planted.bug"
# Failover in seconds: sessions expire after 2 s, a stalled follower leaves the ISR after 1-1.5 s
# (so a paused follower is dropped by its leader before its session expires), ISR changes
# reach the controller within a second.
FAST_PROFILE = (
    "zookeeper.session.timeout.ms=2000",
    "replica.lag.time.max.ms=1000",
    "replica.fetch.wait.max.ms=500",
    "replica.fetch.backoff.ms=200",
    "replica.high.watermark.checkpoint.interval.ms=500",
    "controlled.shutdown.retry.backoff.ms=500",
    "minibroker.isr.change.propagation.interval.ms=200",
    "minibroker.isr.change.propagation.blackout.ms=500",
    "minibroker.isr.change.propagation.max.delay.ms=2000",
)
PROFILE = "demo"


def fast_timing(extra: tuple[str, ...] = ()) -> Timing:
    """The timings FAST_PROFILE (and a scenario's own settings) give, which the scenarios'
    waits are derived from."""
    s = Settings.load(profile=PROFILE, overrides=[*FAST_PROFILE, *extra])
    return Timing(s.get_int("zookeeper.session.timeout.ms"), s.get_int("replica.lag.time.max.ms"))


class ScenarioUnavailable(ClusterError):
    """The scenario cannot run with this build (no fault proxy yet, say); one line says why."""


@dataclass
class RunOptions:
    seed: int = 0
    cluster_dir: Path | None = None  # default: a fresh temporary dir, removed afterwards
    keep: bool = False  # leave the cluster running (and its dir) for inspection
    planted_bug: str | None = None
    records_per_s: float = 120.0
    event_text: EventText = fields_text
    progress: Callable[[str], None] | None = None


def _start_cluster(d: Path, scenario: Scenario, options: RunOptions) -> ClusterState:
    overrides = [*FAST_PROFILE, *scenario.cluster_settings]
    if options.planted_bug:
        overrides.append(f"{PLANTED_BUG_PROPERTY}={options.planted_bug}")
    kwargs: dict[str, Any] = {"brokers": 3, "controllers": 2, "overrides": overrides}
    if scenario.needs_proxy:
        if "proxy" not in inspect.signature(localcluster.up).parameters:
            raise ScenarioUnavailable(
                f"{scenario.name} needs the loopback fault proxy (`cluster up --proxy`), "
                "which this build does not have yet"
            )
        kwargs["proxy"] = True
    try:
        return localcluster.up(d, profile=PROFILE, **kwargs)
    except ClusterError:
        # Start-up is not what a scenario tests, and on a shared machine a free port can be
        # taken between choosing it and binding it: one more try, on fresh ports.
        return localcluster.up(d, profile=PROFILE, **kwargs)


def _log_dir(p: localcluster.ProcessInfo) -> Path:
    """The broker's log dir, from its command line (cluster.json keeps the command)."""
    if "--log-dir" in p.cmd:
        return Path(p.cmd[p.cmd.index("--log-dir") + 1])
    return Path(p.data_dir) / "data"


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Ctrl-C is ignored while the cluster is torn down, so a second one cannot strand it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def run(scenario: Scenario, options: RunOptions | None = None) -> Report:
    """Run `scenario` on a cluster of its own and return the report (see module docstring)."""
    options = options or RunOptions()
    temporary = options.cluster_dir is None
    d = Path(tempfile.mkdtemp(prefix=f"minibroker-{scenario.name}-")) if temporary else None
    d = d or options.cluster_dir
    assert d is not None
    started = time.monotonic()
    state: ClusterState | None = None
    try:
        state = _start_cluster(d, scenario, options)
        return _run_on(state, d, scenario, options, started)
    finally:
        with _no_interrupts():
            if state is not None and not options.keep:
                _down(d, state)
            if temporary and not options.keep:
                shutil.rmtree(d, ignore_errors=True)


def _down(d: Path, state: ClusterState) -> None:
    """Stop every process of the cluster, as cluster.json records them now: a node the
    scenario restarted has a new PID there, which the state we started with does not know."""
    with contextlib.suppress(ClusterError):
        state = ClusterState.load(d)
    localcluster.down(state, timeout_s=10)  # SIGKILLs whatever does not stop in time


def _run_on(
    state: ClusterState, d: Path, scenario: Scenario, options: RunOptions, started: float
) -> Report:
    rng = random.Random(options.seed)
    tag = f"s{options.seed}-{rng.getrandbits(32):08x}"
    timeline = Timeline(event_text=options.event_text, echo=options.progress)
    brokers = {p.id: p.address for p in state.by_role("broker") if p.id is not None}
    sources = [Source(p.name, p.address) for p in state.processes if p.role != "zookeeper"]
    history = History(TOPIC, {}, unclean_loss_expected=scenario.unclean_loss_expected)
    recorder = ZkRecorder(state.zk_connect, history, timeline, PARTITIONS)
    recorder.start()
    workload: Workload | None = None
    try:
        with localcluster.zk_session(state.zk_connect) as zk:
            assignment = create_topic(
                zk, TOPIC, PARTITIONS, REPLICATION_FACTOR, scenario.topic_config,
                random.Random(rng.getrandbits(32)),
            )  # fmt: skip
        history.assignment = {p: tuple(r) for p, r in assignment.partitions.items()}
        timeline.note(
            f"topic {TOPIC}: replicas {history.assignment}, {dict(scenario.topic_config)}"
        )
        workload = Workload(
            history, timeline, brokers, sources, _leader_of(recorder),
            Traffic(options.records_per_s, tag),
        )  # fmt: skip
        ctx = ScenarioContext(
            topic=TOPIC, cluster_dir=d, chaos=ProcessBackend(d), rng=random.Random(rng.random()),
            timeline=timeline, recorder=recorder, workload=workload,
            timing=fast_timing(scenario.cluster_settings), zk_connect=state.zk_connect,
        )  # fmt: skip
        try:
            _settle(ctx, "the topic is fully replicated")
            workload.start()
            ctx.wait_acks(more=60)
        except ScenarioStepFailed as exc:
            raise ClusterError(f"the cluster did not start taking records: {exc}") from None
        try:
            errors = _exercise(ctx, scenario)
        finally:
            ctx.close()
        errors += _validate(ctx, state)
        return Report(
            scenario.name, scenario.description, options.seed, options.planted_bug, str(d),
            time.monotonic() - started, history, timeline, check_all(history), ctx.checks,
            errors,
        )  # fmt: skip
    finally:
        if workload is not None:
            workload.stop()
        recorder.stop()


def _exercise(ctx: ScenarioContext, scenario: Scenario) -> list[str]:
    """The scenario's faults, then healing and settling under load; the steps that failed."""
    errors = []
    ctx.timeline.note(f"scenario {scenario.name} starts")
    try:
        scenario.run(ctx)
    except (ScenarioStepFailed, ChaosError, WaitTimeout) as exc:
        errors.append(str(exc))
        ctx.timeline.note(f"step failed: {exc}")
    ctx.timeline.note("healing: every node running, every link whole")
    try:
        _restore(ctx, scenario)
        _settle(ctx, "the cluster settled after the faults")
        ctx.wait_acks(more=20)
    except (ScenarioStepFailed, ChaosError) as exc:
        errors.append(f"after the scenario: {exc}")
    return errors


def _validate(ctx: ScenarioContext, state: ClusterState) -> list[str]:
    """Stop producing, let the replicas converge, read every partition back up to its HW,
    stop the observers and read every replica's files; the steps that failed."""
    errors = []
    ctx.workload.stop_producing()
    ctx.timeline.note("producer stopped; validating")
    try:
        _quiesce(ctx)
    except ScenarioStepFailed as exc:
        errors.append(f"replicas did not converge: {exc}")
    try:
        ctx.workload.history.final = _final_state(ctx)
    except TimeoutError as exc:
        errors.append(f"the validating read did not finish: {exc!r}")
    ctx.workload.stop()
    ctx.recorder.stop()
    ctx.timeline.add_missed(_logged_events(state))
    _read_logs(state, ctx.workload.history, ctx.workload)
    return errors


def _leader_of(recorder: ZkRecorder) -> Callable[[int], int | None]:
    def leader_of(partition: int) -> int | None:
        s = recorder.latest(partition)
        return s.leader if s is not None and s.leader >= 0 else None

    return leader_of


def _restore(ctx: ScenarioContext, scenario: Scenario) -> None:
    """Heal every cut link, resume paused nodes and (unless the scenario keeps its victims
    down) start the dead ones."""
    for name in sorted(ctx.network_faulted):
        ctx.heal(name)
    for node in ctx.chaos.nodes():
        st = ctx.chaos.state(node.name)
        if st == "paused":
            ctx.act("resume", node.name, "healing")
        elif st == "dead" and not scenario.keeps_down:
            ctx.act("start", node.name, "healing")


def _settle(ctx: ScenarioContext, what: str) -> None:
    """Until every partition has a leader and every registered replica is in its ISR."""

    def settled() -> bool:
        live = ctx.recorder.registered()
        for p in ctx.partitions:
            s = ctx.state(p)
            want = {b for b in ctx.workload.history.assignment.get(p, ()) if b in live}
            if s is None or s.leader < 0 or not want <= set(s.isr):
                return False
        return ctx.recorder.controller_id() is not None

    ctx.wait(settled, what)


def _quiesce(ctx: ScenarioContext) -> None:
    """Until, with nothing produced any more, every ISR member of every partition reports the
    leader's log end offset and the leader's HW has reached it."""

    since = now_ms()

    def quiet() -> bool:
        # Only samples polled after every send was answered count: an older one could show
        # a HW that does not cover the last acknowledgements yet.
        samples = {k: v for k, v in ctx.workload.last_samples().items() if v.ts_ms > since}
        for p in ctx.partitions:
            s = ctx.state(p)
            lead = samples.get((s.leader, p)) if s is not None else None
            if s is None or lead is None or not lead.is_leader:
                return False
            if lead.leader_epoch != s.leader_epoch or lead.high_watermark != lead.log_end_offset:
                return False
            for b in s.isr:
                mine = samples.get((b, p))
                if mine is None or mine.log_end_offset != lead.log_end_offset:
                    return False
        return True

    ctx.wait(quiet, "every ISR member at the leader's log end, HW there too")


def _final_state(ctx: ScenarioContext) -> FinalState:
    final = FinalState()
    samples = ctx.workload.last_samples()
    for p in ctx.partitions:
        s = ctx.state(p)
        if s is None or s.leader < 0:
            continue
        final.leader[p] = s.leader
        final.isr[p] = s.isr
        lead = samples.get((s.leader, p))
        if lead is None:
            continue
        final.high_watermark[p] = lead.high_watermark
        address = ctx.workload.brokers[s.leader]
        final.read[p] = ctx.workload.call(
            ctx.workload.read_partition(p, address, lead.high_watermark), timeout_s=120
        )
    return final


def _logged_events(state: ClusterState) -> Iterator[dict[str, Any]]:
    """Every event the brokers and controllers wrote to their log files."""
    for p in state.processes:
        if p.role not in ("broker", "controller"):
            continue
        try:
            lines = Path(p.log_file).read_text(errors="replace").splitlines()
        except OSError:
            continue
        for line in lines:
            event = parse_line(line)
            if event is not None and isinstance(event.get("ts"), int):
                yield event


def _read_logs(state: ClusterState, history: History, workload: Workload) -> None:
    """Every replica's files as they are (nothing is written any more), with the HW the
    replica last reported, or else its checkpointed one."""
    samples = workload.last_samples()
    for p in state.by_role("broker"):
        if p.id is None:
            continue
        log_dir = _log_dir(p)
        checkpoint = read_offset_checkpoint(log_dir)
        for partition, replicas in sorted(history.assignment.items()):
            if p.id not in replicas:
                continue
            log = read_replica_log(log_dir, p.id, history.topic, partition)
            sample = samples.get((p.id, partition))
            log.high_watermark = (
                sample.high_watermark
                if sample is not None
                else checkpoint.get((history.topic, partition))
            )
            history.logs.append(log)
