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
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.common import Section, cpu_seconds, md_table, rss_mb
from minibroker import localcluster
from minibroker.client import admin_zk
from minibroker.client.admin import BrokerDescription, BrokerUnreachable, describe_broker
from minibroker.client.events import Event
from minibroker.core.types import NO_LEADER, LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import BrokerIdZNode, TopicPartitionStateZNode
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import WaitTimeout, wait_until
from minibroker.runtime.zk_store import Stat, ZkStore

TOPIC = "scale"
REPLICATION_FACTOR = 3
BROKERS = 3
SETTLE_S = 5.0  # after start-up, before sampling idle CPU: the last ISR and HW work ends
IDLE_WINDOW_S = 15.0
SEED = 9  # the replica assignment's two random draws


def _budget_s(partitions: int) -> float:
    """How long one phase (start-up, a broker's return) may take before the run gives up."""
    return 60.0 + partitions * 0.03


# ---- process figures from /proc -------------------------------------------------------------


def idle_cpu_pct(pids: dict[str, int], window_s: float) -> dict[str, float]:
    """CPU% of each process over `window_s` of wall time (100% = one core)."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    started = time.monotonic()
    time.sleep(window_s)  # the measurement window itself, not a synchronisation
    elapsed = time.monotonic() - started
    return {name: (cpu_seconds(pid) - before[name]) / elapsed * 100 for name, pid in pids.items()}


def open_files(pid: int) -> int:
    """How many file descriptors the process holds."""
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def open_files_limit(pid: int) -> int:
    """The process's soft limit on open files (/proc/<pid>/limits)."""
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
    except (OSError, ValueError):
        pass
    return -1


def _wall_ms() -> int:
    return time.time_ns() // 1_000_000


def allow_open_files(partitions: int) -> int:
    """Raise this process's open-file limit, which the cluster's processes inherit, to what
    `partitions` need: a broker keeps each replica's log and index open (Kafka does too, and
    its docs ask for a limit of 100,000 or more). Raising the hard limit needs root; without,
    the soft limit goes up to the hard one. Returns the soft limit now in force."""
    want = 4 * partitions + 4096
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, max(hard, want)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# ---- what the cluster holds --------------------------------------------------------------------


def read_states(zk: ZkStore, partitions: Iterable[int]) -> dict[int, tuple[LeaderAndIsr, Stat]]:
    """The topic's state znodes that exist among `partitions`, with their stats (pipelined)."""
    paths = {p: TopicPartitionStateZNode.path(TopicPartition(TOPIC, p)) for p in partitions}
    got = zk.get_many(paths.values())
    out = {}
    for p, path in paths.items():
        node = got[path]
        if node is not None:
            out[p] = (TopicPartitionStateZNode.decode(node[0], node[1].version), node[1])
    return out


def _describe_all(state: localcluster.ClusterState) -> dict[int, BrokerDescription]:
    out = {}
    for b in state.by_role("broker"):
        if localcluster.is_alive(b) and b.id is not None:
            try:
                out[b.id] = describe_broker(b.address, timeout_s=30.0)
            except BrokerUnreachable:
                continue
    return out


def serving_count(descriptions: dict[int, BrokerDescription], partitions: int) -> int:
    """Partitions whose every replica serves: exactly one broker leads it with an ISR of
    RF members, every follower named in its ISR has fetched from it (the leader knows its
    LEO), and each follower follows that leader at that leader epoch."""
    count = 0
    for p in range(partitions):
        tp = TopicPartition(TOPIC, p)
        replicas = {b: d.partitions[tp] for b, d in descriptions.items() if tp in d.partitions}
        leaders = [r for r in replicas.values() if r.is_leader]
        if len(leaders) != 1 or len(leaders[0].isr) != REPLICATION_FACTOR:
            continue
        leader = leaders[0]
        followers = [b for b in leader.isr if b != leader.leader]
        fetched = all(
            (r := leader.remote(b)) is not None and r.log_end_offset >= 0 for b in followers
        )
        agree = all(
            b in replicas
            and replicas[b].leader == leader.leader
            and replicas[b].leader_epoch == leader.leader_epoch
            for b in followers
        )
        count += fetched and agree
    return count


# ---- one run ------------------------------------------------------------------------------------


@dataclass
class Failover:
    victim: str
    moved: int  # leaderships the victim held
    expiry_after_kill_s: float  # the controller's broker_change event
    moved_after_expiry_s: float  # the last new leader written in ZooKeeper (state mtime)
    applied_after_expiry_s: float  # the last `became_leader` on the new leaders
    returned_s: float | None = None  # restart until it is in every ISR again


@dataclass
class ScaleRun:
    partitions: int
    profile: str
    startup_s: float | None = None
    states_written_s: float | None = None  # creation until the last state znode was created
    cpu_pct: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    failover: Failover | None = None
    open_files_limit: int = 0
    created_ms: int = 0  # wall clock when the topic was created
    failed: str | None = None  # the phase that did not finish, and what was measured by then
    wall_s: float = 0.0


def _create_topic(zk: ZkStore, partitions: int) -> int:
    created_ms = _wall_ms()
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


def _wait_serving(state: localcluster.ClusterState, partitions: int, timeout_s: float) -> None:
    """Until every replica serves. DescribeBroker costs the brokers a description of every
    partition, so the poll slows with size (0.25 s at 1,000, 2.5 s at 10,000); every fourth
    poll also looks for a failed request, which would leave the wait hopeless."""
    seen, polls = [0], [0]
    scan = LogScan(state.by_role("broker"))

    def all_serving() -> bool:
        seen[0] = serving_count(_describe_all(state), partitions)
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


def _kill_one(
    state: localcluster.ClusterState, zk: ZkStore, partitions: int, session_s: float
) -> Failover:
    """SIGKILL the broker leading the most partitions; time the move of its leaderships.

    The waits look at log files and at one znode's existence, cheap enough to poll often; the
    state znodes are read only to confirm, and their mtimes, not the poll, give the time."""
    before = read_states(zk, range(partitions))
    counts: dict[int, int] = {}
    for s, _stat in before.values():
        counts[s.leader] = counts.get(s.leader, 0) + 1
    victim_id = max(counts, key=lambda b: (counts[b], -b))
    victim = next(p for p in state.by_role("broker") if p.id == victim_id)
    led = sorted(p for p, (s, _stat) in before.items() if s.leader == victim_id)
    survivors = [b for b in state.by_role("broker") if b.id != victim_id]
    controller = state.by_role("controller")[0]
    scan = LogScan([controller, *survivors])
    killed_ms = _wall_ms()
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
    started_ms = _wall_ms()
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


def _programs(state: localcluster.ClusterState) -> dict[str, int]:
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
    n, budget = run.partitions, _budget_s(run.partitions)
    session_s = Settings.load(profile=run.profile).get_int("zookeeper.session.timeout.ms") / 1000
    run.created_ms = _create_topic(zk, n)
    t0 = time.monotonic()
    _phase(run, "start-up", lambda: _wait_serving(state, n, budget))
    run.startup_s = time.monotonic() - t0
    run.states_written_s = _states_written_s(zk, run)
    _note(run, f"every replica serving after {run.startup_s:.1f} s; idle measurement")
    time.sleep(SETTLE_S)  # a measurement design choice: let start-up work end first
    pids = _programs(state)
    run.cpu_pct = idle_cpu_pct(pids, IDLE_WINDOW_S)
    run.rss = {name: rss_mb(pid) for name, pid in pids.items()}
    _note(run, "SIGKILL of the busiest leader")
    run.failover = failover = _phase(run, "failover", lambda: _kill_one(state, zk, n, session_s))
    _note(run, f"{failover.moved} leaderships moved; restarting {failover.victim}")
    failover.returned_s = _phase(
        run, "restart", lambda: _restart(state, zk, failover.victim, n, budget)
    )


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
                run.rss = run.rss or {n: rss_mb(pid) for n, pid in _programs(state).items()}
                if run.states_written_s is None and run.created_ms:
                    run.states_written_s = _states_written_s(zk, run)
    finally:
        localcluster.down(state)
        if not keep:
            shutil.rmtree(cluster_dir, ignore_errors=True)
    run.wall_s = time.monotonic() - started
    return run


# ---- the report -------------------------------------------------------------------------------


def figures(run: ScaleRun) -> dict[str, float]:
    """The named values the goals table reads; only those this run measured."""
    n = run.partitions
    out: dict[str, float] = {}
    if run.startup_s is not None:
        out[f"scale.{n}.startup_s"] = round(run.startup_s, 2)
    brokers = [v for k, v in run.cpu_pct.items() if k.startswith("broker-")]
    if brokers:
        out[f"scale.{n}.idle_cpu_pct_max"] = round(max(brokers), 2)
    controllers = [v for k, v in run.cpu_pct.items() if k.startswith("controller-")]
    if controllers:
        out[f"scale.{n}.idle_cpu_pct_controller"] = round(max(controllers), 2)
    rss = [v for k, v in run.rss.items() if k.startswith("broker-")]
    if rss:
        out[f"scale.{n}.rss_mb_max"] = round(max(rss), 1)
    f = run.failover
    if f is not None:
        out[f"scale.{n}.moved_after_expiry_s"] = round(f.moved_after_expiry_s, 3)
        out[f"scale.{n}.applied_after_expiry_s"] = round(f.applied_after_expiry_s, 3)
        out[f"scale.{n}.moved_after_kill_s"] = round(
            f.expiry_after_kill_s + f.moved_after_expiry_s, 3
        )
        out[f"scale.{n}.leaderships_moved"] = float(f.moved)
    return out


def _s(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(runs: Iterable[ScaleRun]) -> str:
    runs = list(runs)
    summary = md_table(
        [
            "partitions",
            "start-up s",
            "states in ZK s",
            "leaderships moved",
            "expiry after kill s",
            "moved after expiry s",
            "applied after expiry s",
            "broker back in ISRs s",
            "run s",
        ],
        [
            [
                r.partitions,
                _s(r.startup_s),
                _s(r.states_written_s),
                r.failover.moved if r.failover else "-",
                _s(r.failover.expiry_after_kill_s if r.failover else None),
                _s(r.failover.moved_after_expiry_s if r.failover else None, 3),
                _s(r.failover.applied_after_expiry_s if r.failover else None, 3),
                _s(r.failover.returned_s if r.failover else None),
                f"{r.wall_s:.0f}",
            ]
            for r in runs
        ],
    )
    names = sorted({name for r in runs for name in r.rss})
    per_process = md_table(
        ["partitions", *(f"{n} CPU% / RSS MB" for n in names)],
        [
            [
                r.partitions,
                *(
                    f"{_s(r.cpu_pct.get(n), 1)} / {_s(r.rss.get(n), 0)}" if n in r.rss else "-"
                    for n in names
                ),
            ]
            for r in runs
        ],
    )
    failed = [
        f"- {r.partitions} partitions did not finish (open-file limit {r.open_files_limit}): "
        f"{r.failed}"
        for r in runs
        if r.failed
    ]
    profile = runs[0].profile if runs else ""
    text = (
        f"One topic of N partitions x RF {REPLICATION_FACTOR} on 3 brokers, 1 controller and "
        f"ZooKeeper (profile {profile}). Start-up: topic creation until every replica serves "
        "(one leader with a full ISR, both followers fetched from it); states in ZK: until the "
        "controller created the last state znode. Failover: SIGKILL of the broker leading most "
        "partitions; expiry = the controller's broker_change event, moved = the last new "
        "leader's state znode mtime, applied = the last became_leader on a new leader; back "
        "in ISRs: the killed broker's restart until ZooKeeper has it in every ISR.\n\n"
        f"{summary}\n\nIdle, {IDLE_WINDOW_S:.0f} s after a {SETTLE_S:.0f} s settle (100% = one "
        f"core):\n\n{per_process}"
    )
    return text + ("\n\n" + "\n".join(failed) if failed else "")


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
