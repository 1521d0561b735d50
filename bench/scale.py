"""`python -m bench scale [--partitions 1000 [10000]] [--profile demo]`: one topic of N partitions
x RF 3 on a process-mode cluster of 3 brokers, 1 controller and ZooKeeper.

Per N: start-up (topic creation until every replica serves: each partition's leader leads with
a full ISR and both followers have fetched from it), idle CPU and RSS of every process, the
leadership move after one broker's SIGKILL (from the moment the controller sees its session
expire, and from the kill) and the killed broker's return until it is back in every ISR.
Times come from the processes' own records where they exist: ZooKeeper's mtimes of the state
znodes, the controller's `broker_change` and the brokers' `became_leader` events, read from
their log files (wall-clock ms, all on this one machine); start-up is the one polled time
(DescribeBroker every 0.25 s at 1,000 partitions, slower with size). 10,000 partitions need
about 2 file descriptors per partition in each broker; the benchmark raises its open-file
limit (inherited by the cluster) as far as it may and reports a broker that runs out.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from bench.common import Section, rss_mb
from bench.scale_probes import (
    BROKERS,
    IDLE_WINDOW_S,
    REPLICATION_FACTOR,
    SEED,
    SETTLE_S,
    TOPIC,
    allow_open_files,
    budget_s,
    describe_all,
    idle_cpu_pct,
    open_files,
    open_files_limit,
    read_states,
    serving_count,
    wall_ms,
)
from bench.scale_report import Failover, ScaleRun, figures, markdown
from minibroker import localcluster
from minibroker.client import admin_zk
from minibroker.client.events import Event
from minibroker.core.types import NO_LEADER, LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import BrokerIdZNode
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import WaitTimeout, wait_until
from minibroker.runtime.zk_store import Stat, ZkStore


def create_topic(zk: ZkStore, partitions: int) -> int:
    created_ms = wall_ms()
    admin_zk.create_topic(zk, TOPIC, partitions, REPLICATION_FACTOR, {}, random.Random(SEED))
    return created_ms


class RunFailed(RuntimeError):
    """A phase cannot finish: a broker reported a request it could not carry out."""


class LogScan:
    """Events from the processes' log files (the same JSON lines their Events service keeps),
    read as the files grow, from where they ended when the scan was made. Reading a file
    costs the cluster nothing, where asking a busy broker for thousands of events would
    slow the very work being timed; and a broker out of file descriptors cannot accept the
    connection its Events service needs, while its log still says what failed."""

    def __init__(self, procs: Iterable[localcluster.ProcessInfo]) -> None:
        self.procs = list(procs)
        self.offsets = {p.name: _size(p.log_file) for p in self.procs}

    def new_events(self, *names: str) -> list[tuple[localcluster.ProcessInfo, Event]]:
        """Events named `names` logged since the last call, whole lines only."""
        out = []
        needles = [f'"event":"{n}"'.encode() for n in names]
        for p in self.procs:
            with open(p.log_file, "rb") as f:
                f.seek(self.offsets[p.name])
                data = f.read()
            end = data.rfind(b"\n") + 1  # a line still being written is read next time
            self.offsets[p.name] += end
            for line in data[:end].splitlines():
                if any(n in line for n in needles):
                    out.append((p, json.loads(line)))
        return out


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _failures(scan: LogScan) -> list[str]:
    """Each broker's first `request_failed` since the last look, with its open files."""
    out: dict[str, str] = {}
    for p, e in scan.new_events("request_failed"):
        out.setdefault(
            p.name,
            f"{p.name}: {e.get('request')} failed with {e.get('error')} "
            f"(open files {open_files(p.pid)} of {open_files_limit(p.pid)})",
        )
    return list(out.values())


def wait_serving(state: localcluster.ClusterState, partitions: int, timeout_s: float) -> None:
    """Until every replica serves. DescribeBroker costs the brokers a description of every
    partition, so the poll slows with size (0.25 s at 1,000, 2.5 s at 10,000); every fourth
    poll also looks for a failed request, which would leave the wait hopeless."""
    seen, polls = [0], [0]
    scan = LogScan(state.by_role("broker"))

    def all_serving() -> bool:
        seen[0] = serving_count(describe_all(state), partitions)
        polls[0] += 1
        if seen[0] < partitions and polls[0] % 4 == 0:
            failures = _failures(scan)
            if failures:
                raise RunFailed(
                    f"{seen[0]} of {partitions} partitions serving; " + "; ".join(failures)
                )
        return seen[0] == partitions

    interval_s = max(0.25, partitions / 4000)
    try:
        wait_until(
            all_serving, timeout_s=timeout_s, what="every replica serving", interval_s=interval_s
        )
    except WaitTimeout as exc:
        raise WaitTimeout(f"{exc} ({seen[0]} of {partitions} partitions serving)") from None


def _busiest_leader(
    state: localcluster.ClusterState, zk: ZkStore, partitions: int
) -> tuple[localcluster.ProcessInfo, list[int]]:
    """The broker leading the most partitions (the lowest id on a tie), and those partitions."""
    before = read_states(zk, range(partitions))
    counts: dict[int, int] = {}
    for s, _stat in before.values():
        counts[s.leader] = counts.get(s.leader, 0) + 1
    victim_id = max(counts, key=lambda b: (counts[b], -b))
    victim = next(p for p in state.by_role("broker") if p.id == victim_id)
    return victim, sorted(p for p, (s, _stat) in before.items() if s.leader == victim_id)


def kill_busiest(
    state: localcluster.ClusterState, zk: ZkStore, partitions: int, session_s: float
) -> Failover:
    """SIGKILL the broker leading the most partitions; time the move of its leaderships.

    The waits look at log files and at one znode's existence, cheap enough to poll often; the
    state znodes are read only to confirm, and their mtimes, not the poll, give the time."""
    victim, led = _busiest_leader(state, zk, partitions)
    victim_id = victim.id if victim.id is not None else NO_LEADER
    survivors = [b for b in state.by_role("broker") if b.id != victim_id]
    controller = state.by_role("controller")[0]
    scan = LogScan([controller, *survivors])
    killed_ms = wall_ms()
    localcluster.send(state, victim.name, "kill")
    seen: list[tuple[localcluster.ProcessInfo, Event]] = []
    wait_until(
        lambda: zk.exists(BrokerIdZNode.path(victim_id)) is None,
        timeout_s=session_s + 30,
        what=f"/brokers/ids/{victim_id} to go",
        interval_s=0.02,
    )

    def moved() -> dict[int, tuple[LeaderAndIsr, Stat]] | None:
        seen.extend(scan.new_events("broker_change", "leader_elected", "became_leader"))
        if sum(e["event"] == "leader_elected" for _p, e in seen) < len(led):
            return None
        now = read_states(zk, led)
        done = all(now[p][0].leader not in (victim_id, NO_LEADER) for p in led)
        return now if done else None

    after = wait_until(moved, timeout_s=60, what="every leadership moved", interval_s=0.05)
    new_leaders = {p: (s.leader, s.leader_epoch) for p, (s, _stat) in after.items()}

    def applied() -> int | None:
        seen.extend(scan.new_events("broker_change", "leader_elected", "became_leader"))
        done: dict[int, int] = {}
        for p, e in seen:
            if e["event"] == "became_leader":
                part = int(str(e["tp"]).rsplit("-", 1)[1])
                if new_leaders.get(part) == (p.id, e["leader_epoch"]):
                    done[part] = int(e["ts"])
        return max(done.values()) if len(done) == len(led) else None

    applied_ms = wait_until(applied, timeout_s=60, what="new leaders applied", interval_s=0.05)
    change = [
        int(e["ts"])
        for _p, e in seen
        if e["event"] == "broker_change" and victim_id in e.get("dead", [])
    ]
    expiry_ms = change[0] if change else killed_ms
    written_ms = max(stat.mtime_ms for _s, stat in after.values())
    return Failover(
        victim=victim.name,
        moved=len(led),
        expiry_after_kill_s=(expiry_ms - killed_ms) / 1000,
        moved_after_expiry_s=(written_ms - expiry_ms) / 1000,
        applied_after_expiry_s=(applied_ms - expiry_ms) / 1000,
    )


def _restart(
    state: localcluster.ClusterState, zk: ZkStore, name: str, partitions: int, timeout_s: float
) -> float:
    """Start a killed broker again; seconds until ZooKeeper has it in every ISR again (the
    last of those ISR writes' mtime; the poll slows with size, as reading costs)."""
    broker_id = state.process(name).id
    started_ms = wall_ms()
    localcluster.start(state, name)

    def back() -> int | None:
        if zk.exists(BrokerIdZNode.path(broker_id or -1)) is None:
            return None
        states = read_states(zk, range(partitions))
        if len(states) < partitions or any(broker_id not in s.isr for s, _ in states.values()):
            return None
        return max(stat.mtime_ms for _s, stat in states.values())

    interval_s = max(0.25, partitions / 2000)
    last_ms = wait_until(
        back, timeout_s=timeout_s, what=f"{name} back in every ISR", interval_s=interval_s
    )
    return (last_ms - started_ms) / 1000


def _rebalance(zk: ZkStore, partitions: int, timeout_s: float) -> None:
    """A preferred replica election of every partition, as Kafka's automatic rebalance would
    do after the restart, so that the controlled shutdown next stops a broker leading its
    third (~3,334 of 10,000), not the half it took over from the killed one."""
    admin_zk.request_preferred_replica_election(
        zk, [TopicPartition(TOPIC, p) for p in range(partitions)]
    )
    wait_until(
        lambda: not admin_zk.election_in_progress(zk),
        timeout_s=timeout_s,
        what="the preferred replica election",
        interval_s=0.25,
    )

    def settled() -> bool:
        # Followers move to the new leaders; one that lagged meanwhile left the ISR, and a
        # controlled shutdown cannot move a leadership whose ISR has no one else.
        states = read_states(zk, range(partitions))
        return all(len(s.isr) == REPLICATION_FACTOR for s, _stat in states.values())

    wait_until(settled, timeout_s=timeout_s, what="every ISR full again", interval_s=1.0)


def _controlled_stop(
    state: localcluster.ClusterState, zk: ZkStore, partitions: int
) -> tuple[int, float, float]:
    """SIGTERM (controlled shutdown) to the broker leading the most partitions: how many it
    led, and seconds from the signal until the controller had written a new leader for every
    one of them (its last `leader_elected` for them; the state znodes' mtimes move again with
    the ISR removals that follow) and until the process exited."""
    victim, led = _busiest_leader(state, zk, partitions)
    victim_id = victim.id if victim.id is not None else NO_LEADER
    scan = LogScan(state.by_role("controller"))
    stop_ms = wall_ms()
    localcluster.send(state, victim.name, "stop")  # returns once the process has exited
    exited_s = (wall_ms() - stop_ms) / 1000
    wanted = {f"{TOPIC}-{p}" for p in led}
    elected: dict[str, int] = {}

    def moved() -> int | None:
        for _p, e in scan.new_events("leader_elected"):
            if e.get("strategy") == "controlled_shutdown" and e["tp"] in wanted:
                elected[e["tp"]] = int(e["ts"])
        if len(elected) < len(wanted):
            return None
        now = read_states(zk, led)
        if any(now[p][0].leader in (victim_id, NO_LEADER) for p in led):
            return None
        return max(elected.values())

    last_ms = wait_until(moved, timeout_s=60, what="every leadership moved", interval_s=0.25)
    return len(led), (last_ms - stop_ms) / 1000, exited_s


def programs(state: localcluster.ClusterState) -> dict[str, int]:
    """Every process to sample, ZooKeeper last, by name and PID."""
    procs = [p for p in state.processes if p.role != "zookeeper"] + state.by_role("zookeeper")
    return {p.name: p.pid for p in procs if localcluster.is_alive(p)}


def _phase(run: ScaleRun, name: str, fn: Callable[[], Any]) -> Any:
    """Run one phase; a timeout ends the run with the phase's name and what it saw."""
    try:
        return fn()
    except (WaitTimeout, RunFailed, localcluster.ClusterError) as exc:
        run.failed = f"{name}: {exc}"
        raise


def _note(run: ScaleRun, text: str) -> None:
    """Progress on stderr: a 10,000-partition run takes minutes."""
    print(f"scale {run.partitions}: {text}", file=sys.stderr, flush=True)


def _states_written_s(zk: ZkStore, run: ScaleRun) -> float | None:
    """Topic creation until the controller created the last state znode (its ctime), or None
    while some are missing."""
    states = read_states(zk, range(run.partitions))
    if len(states) < run.partitions:
        return None
    return (max(stat.ctime_ms for _s, stat in states.values()) - run.created_ms) / 1000


def _phases(run: ScaleRun, state: localcluster.ClusterState, zk: ZkStore) -> None:
    n, budget = run.partitions, budget_s(run.partitions)
    session_s = Settings.load(profile=run.profile).get_int("zookeeper.session.timeout.ms") / 1000
    run.created_ms = create_topic(zk, n)
    t0 = time.monotonic()
    _phase(run, "start-up", lambda: wait_serving(state, n, budget))
    run.startup_s = time.monotonic() - t0
    run.states_written_s = _states_written_s(zk, run)
    _note(run, f"every replica serving after {run.startup_s:.1f} s; idle measurement")
    time.sleep(SETTLE_S)  # a measurement design choice: let start-up work end first
    pids = programs(state)
    run.cpu_pct = idle_cpu_pct(pids, IDLE_WINDOW_S)
    run.rss = {name: rss_mb(pid) for name, pid in pids.items()}
    _note(run, "SIGKILL of the busiest leader")
    run.failover = failover = _phase(run, "failover", lambda: kill_busiest(state, zk, n, session_s))
    _note(run, f"{failover.moved} leaderships moved; restarting {failover.victim}")
    failover.returned_s = _phase(
        run, "restart", lambda: _restart(state, zk, failover.victim, n, budget)
    )
    _note(run, "preferred replica election of every partition")
    _phase(run, "preferred election", lambda: _rebalance(zk, n, budget))
    _note(run, "controlled shutdown of the busiest leader")
    run.shutdown = _phase(run, "controlled shutdown", lambda: _controlled_stop(state, zk, n))


def run_one(partitions: int, profile: str, keep: bool = False) -> ScaleRun:
    """One cluster, every phase; a phase that times out ends the run (recorded in `failed`)."""
    run = ScaleRun(partitions, profile)
    started = time.monotonic()
    cluster_dir = Path(tempfile.mkdtemp(prefix=f"bench-scale-{partitions}-", dir="/tmp"))
    run.open_files_limit = allow_open_files(partitions)
    state = localcluster.up(cluster_dir, brokers=BROKERS, controllers=1, profile=profile)
    _note(run, f"cluster up in {cluster_dir}; creating the topic")
    try:
        with localcluster.zk_session(state.zk_connect, timeout_ms=30_000) as zk:
            try:
                _phases(run, state, zk)
            except (WaitTimeout, RunFailed, localcluster.ClusterError):
                _note(run, f"gave up: {run.failed}")
                run.rss = run.rss or {n: rss_mb(pid) for n, pid in programs(state).items()}
                if run.states_written_s is None and run.created_ms:
                    run.states_written_s = _states_written_s(zk, run)
    finally:
        localcluster.down(state)
        if not keep:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    run.wall_s = time.monotonic() - started
    return run


# ---- the report -------------------------------------------------------------------------------


def measure(
    partitions: tuple[int, ...] = (1000,), profile: str = "demo", keep: bool = False
) -> list[Section]:
    """Run every size in `partitions` in turn; one Section with a row per size. `keep` leaves
    each cluster's dir (logs, data) in /tmp for a look afterwards."""
    runs = [run_one(n, profile, keep) for n in partitions]
    out: dict[str, float] = {}
    for r in runs:
        out.update(figures(r))
    return [Section(title="Scale: partitions per cluster", markdown=markdown(runs), figures=out)]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--partitions", type=int, nargs="+", default=[1000], help="sizes to run (default 1000)"
    )
    parser.add_argument("--profile", default="demo", help="timing profile (default demo)")
    parser.add_argument("--keep", action="store_true", help="keep each cluster's dir in /tmp")


def main(args: argparse.Namespace) -> None:
    for section in measure(tuple(args.partitions), args.profile, args.keep):
        print(f"## {section.title}\n\n{section.markdown}\n")
        for name, value in sorted(section.figures.items()):
            print(f"{name} = {value:g}")
