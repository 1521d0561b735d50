"""`python -m bench dashboard [--seconds 10] [--rounds 3] [--partitions 1000]`: what the live
dashboard costs the cluster, and how fast a change reaches its page.

1. **Produce throughput with the dashboard open and without**: the load benchmark's cluster
   (3 brokers, RF 3, one partition led by each, Kafka's timings) and its Producer case (Kafka's
   defaults, acks=all, 100 B records) for `seconds` a run; `rounds` pairs of runs with a
   `minibroker dashboard --dir` process and a page open on it, once running and once frozen
   (SIGSTOP), in ABBA order; the medians compared.
2. **N partitions x RF 3** (demo profile, a long session): with a page open on a quiet cluster,
   the dashboard process's CPU and RSS (and the page's own CPU); then, twice, a follower is
   paused while a record goes to some of the partitions it follows (30, then all of them: a
   burst), so that their leaders drop it, and resumed, so that they take it back; for every
   changed partition the time from its state znode's mtime (ZooKeeper's clock) to the moment
   the page's row showed the new ISR (the page's clock: the same machine's).

The page is headless Debian chromium when installed, else a Server-Sent Events reader.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import shutil
import signal
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.common import Section, cpu_seconds, md_table, rss_mb
from bench.dashboard_page import Page, dashboard_process, open_page
from bench.load_cluster import Cluster, running_cluster
from bench.minibroker_load import client_built
from bench.scale_probes import (
    REPLICATION_FACTOR,
    SEED,
    TOPIC,
    allow_open_files,
    budget_s,
    describe_all,
    read_states,
    serving_count,
)
from minibroker import localcluster
from minibroker.client import Producer, admin_zk
from minibroker.core.types import LeaderAndIsr
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import Stat, ZkStore

SETTLE_S = 5.0
CATCH_UP_S = 1.0
LONG_SESSION_MS = 30_000
FEW_WRITTEN = 30  # partitions written while the follower is paused, in the "few" round
IDLE_WINDOW_S = 15.0
RECORD_BYTES = 100


# ---- 1. throughput with and without the dashboard ---------------------------------------------


def _producer_rate(cluster: Cluster, seconds: float) -> float:
    return asyncio.run(client_built(cluster, -1, RECORD_BYTES, seconds)).records_per_s


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def throughput(seconds: float, rounds: int, logs: Path) -> tuple[list[float], list[float], str]:
    """Records/s of each run without and with the dashboard open, and what the page was.

    The dashboard and its page run all along; for a run "without" they are frozen (SIGSTOP:
    no CPU, no requests) and thawed after. Starting them for every run would put their start-up
    next to the run; far apart in time, the load's own drift (±15% from run to run on this
    machine) would swamp the difference. Runs alternate, in ABBA order."""
    without: list[float] = []
    with_page: list[float] = []
    with running_cluster(partitions=3) as cluster:
        _producer_rate(cluster, 1.0)  # warm-up: connections, first segment pages
        with dashboard_process(cluster.state.dir, logs / "dashboard-load.log") as (proc, url):
            page = open_page(url)
            try:
                wait_until(lambda: page.rows() == 3, timeout_s=30, what="the page's rows")
                frozen = [proc.pid, *page.pids()]
                time.sleep(SETTLE_S)

                def run_without() -> None:
                    _signal_all(frozen, signal.SIGSTOP)
                    try:
                        without.append(_producer_rate(cluster, seconds))
                    finally:
                        _signal_all(frozen, signal.SIGCONT)

                def run_with() -> None:
                    with_page.append(_producer_rate(cluster, seconds))

                for i in range(rounds):
                    pair = [run_without, run_with] if i % 4 in (0, 3) else [run_with, run_without]
                    for run in pair:
                        # A thawed dashboard first catches up with what it missed: not in a run.
                        time.sleep(CATCH_UP_S)
                        run()
                    print(f"  round {i + 1}: without {without[-1]:,.0f}, "
                          f"with {with_page[-1]:,.0f} rec/s", flush=True)  # fmt: skip
            finally:
                page.close()
            kind = page.kind
    return without, with_page, kind


# ---- 2. many partitions: idle cost and change -> page -----------------------------------------


def _wait_serving(state: localcluster.ClusterState, partitions: int) -> None:
    wait_until(
        lambda: serving_count(describe_all(state), partitions) == partitions,
        timeout_s=budget_s(partitions),
        what=f"{partitions} partitions serving",
        interval_s=max(0.25, partitions / 4000),
    )


def _cpu_pct(pids: list[int], window_s: float) -> float:
    def total() -> float:
        out = 0.0
        for pid in pids:
            try:
                out += cpu_seconds(pid)
            except OSError:
                continue  # a browser helper that came and went
        return out

    before, started = total(), time.monotonic()
    time.sleep(window_s)  # the measurement window itself, not a synchronisation
    return (total() - before) / (time.monotonic() - started) * 100


def _isr_text(isr: tuple[int, ...]) -> str:
    return ",".join(str(b) for b in sorted(isr))


States = dict[int, tuple[LeaderAndIsr, Stat]]


def _change_delays_ms(
    page: Page, zk: ZkStore, before: States, ok: Callable[[int, LeaderAndIsr], bool]
) -> tuple[list[float], States]:
    """Once every partition's state in ZooKeeper satisfies `ok` and the page showed each ISR
    change: the delay of each partition whose ISR changed (page time - state znode mtime), and
    the states now."""

    def settled() -> States | None:
        states = read_states(zk, before)
        return states if all(ok(p, s) for p, (s, _stat) in states.items()) else None

    after = wait_until(settled, timeout_s=60, what="the ISR change in ZooKeeper", interval_s=0.5)
    want = {
        f"{TOPIC}-{p}": (_isr_text(tuple(s.isr)), stat.mtime_ms)
        for p, (s, stat) in after.items()
        if _isr_text(tuple(s.isr)) != _isr_text(tuple(before[p][0].isr))
    }
    shown: dict[tuple[str, str], int] = {}

    def all_shown() -> bool:
        for key, isr, t in page.seen():
            shown.setdefault((key, isr), t)
        return all((key, isr) in shown for key, (isr, _m) in want.items())

    wait_until(all_shown, timeout_s=60, what="every change on the page", interval_s=0.2)
    return [float(shown[(k, isr)] - mtime) for k, (isr, mtime) in want.items()], after


def many_partitions(partitions: int, logs: Path) -> dict[str, float | str]:
    allow_open_files(partitions)
    cluster_dir = Path(tempfile.mkdtemp(prefix=f"bench-dashboard-{partitions}-", dir="/tmp"))
    # A session long enough that the paused follower stays registered: the ISR changes are the
    # leaders' own writes, not a failover.
    state = localcluster.up(
        cluster_dir / "cluster",
        profile="demo",
        overrides=[f"zookeeper.session.timeout.ms={LONG_SESSION_MS}"],
    )
    out: dict[str, float | str] = {}
    try:
        with localcluster.zk_session(state.zk_connect, timeout_ms=30_000) as zk:
            admin_zk.create_topic(
                zk, TOPIC, partitions, REPLICATION_FACTOR, {}, random.Random(SEED)
            )
            _wait_serving(state, partitions)
            log = logs / f"dashboard-{partitions}.log"
            with dashboard_process(state.dir, log) as (proc, url):
                page = open_page(url)
                try:
                    out["page"] = page.kind
                    loaded = time.monotonic()
                    wait_until(lambda: page.rows() == partitions, timeout_s=60, what="rows")
                    out["render_s"] = time.monotonic() - loaded
                    time.sleep(SETTLE_S)  # the last start-up work ends before the idle window
                    page_pids = page.pids()
                    out["idle_cpu_pct"] = _cpu_pct([proc.pid], IDLE_WINDOW_S)
                    if page_pids:
                        out["page_cpu_pct"] = _cpu_pct(page_pids, IDLE_WINDOW_S)
                    out["rss_mb"] = rss_mb(proc.pid)
                    for name, count in (("few", FEW_WRITTEN), ("burst", None)):
                        delays = _pause_and_resume(state, zk, page, partitions, count)
                        out.update(_delay_figures(name, delays))
                finally:
                    page.close()
    finally:
        localcluster.down(state)
        shutil.rmtree(cluster_dir, ignore_errors=True)
    return out


def _produce_one_each(state: localcluster.ClusterState, skip: int, partitions: list[int]) -> None:
    async def send() -> None:
        live = [b.address for b in state.by_role("broker") if b.id != skip]
        async with Producer(live, acks=1, linger_ms=5) as producer:
            for p in partitions:
                await producer.send(TOPIC, b"x", partition=p)
            await producer.flush()

    asyncio.run(send())


def _pause_and_resume(
    state: localcluster.ClusterState,
    zk: ZkStore,
    page: Page,
    partitions: int,
    written: int | None,
) -> list[float]:
    """Pause the last broker, write a record to `written` of the partitions it follows (all of
    them: None), so that their leaders drop it (Kafka 2.5+ drops only a follower that lacks
    data); resume it, and they take it back. The delays of both kinds of change."""
    follower = state.by_role("broker")[-1]
    fid = follower.id
    assert fid is not None
    before = read_states(zk, range(partitions))
    followed = [p for p, (s, _stat) in before.items() if s.leader != fid]
    chosen = set(followed[:written] if written is not None else followed)
    page.seen()  # from here on
    localcluster.send(state, follower.name, "pause")
    try:
        _produce_one_each(state, fid, sorted(chosen))
        shrink, shrunk = _change_delays_ms(
            page, zk, before, lambda p, s: p not in chosen or fid not in s.isr
        )
    finally:
        localcluster.send(state, follower.name, "resume")
    expand, _ = _change_delays_ms(page, zk, shrunk, lambda _p, s: len(s.isr) == REPLICATION_FACTOR)
    return shrink + expand


def _delay_figures(name: str, delays: list[float]) -> dict[str, float | str]:
    delays = sorted(delays)
    return {
        f"{name}.changes": float(len(delays)),
        f"{name}.delay_median_ms": statistics.median(delays),
        f"{name}.delay_p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))],
        f"{name}.delay_max_ms": delays[-1],
    }


# ---- the report ----------------------------------------------------------------------------------


def measure(seconds: float = 5.0, rounds: int = 12, partitions: int = 1000) -> list[Section]:
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-logs-") as tmp:
        logs = Path(tmp)
        without, with_page, kind = throughput(seconds, rounds, logs)
        many = many_partitions(partitions, logs)
    ratio = statistics.median(with_page) / statistics.median(without)
    runs = md_table(
        ["run", "without the dashboard (rec/s)", "with a page open (rec/s)"],
        [
            (i + 1, f"{a:,.0f}", f"{b:,.0f}")
            for i, (a, b) in enumerate(zip(without, with_page, strict=True))
        ]
        + [
            ("median", f"{statistics.median(without):,.0f}", f"{statistics.median(with_page):,.0f}")
        ],
    )
    page_cpu = many.get("page_cpu_pct")
    cost = md_table(
        [
            "partitions",
            "all rows on the page",
            "dashboard CPU, idle",
            "dashboard RSS",
            "the page's CPU, idle",
        ],  # fmt: skip
        [
            (
                f"{partitions:,} × RF 3",
                f"{float(many['render_s']):.1f} s",
                f"{float(many['idle_cpu_pct']):.1f}%",
                f"{float(many['rss_mb']):.0f} MB",
                "-" if page_cpu is None else f"{float(page_cpu):.1f}%",
            )
        ],
    )
    delays = md_table(
        ["ISR changes (shrinks and expands)", "count", "znode → page median", "p99", "max"],
        [
            (
                what,
                f"{float(many[f'{name}.changes']):.0f}",
                f"{float(many[f'{name}.delay_median_ms']):.0f} ms",
                f"{float(many[f'{name}.delay_p99_ms']):.0f} ms",
                f"{float(many[f'{name}.delay_max_ms']):.0f} ms",
            )
            for name, what in (
                ("few", f"{FEW_WRITTEN} partitions written while a follower is paused"),
                ("burst", "every partition it follows written (a burst)"),
            )
        ],
    )
    markdown = (
        f"Producer (Kafka's defaults), acks=all, {RECORD_BYTES} B records, {seconds:g} s a run, "
        f"3 brokers RF 3; the page: {kind}. With ÷ without (medians): **{ratio:.3f}**.\n\n"
        f"{runs}\n\n"
        f"A quiet cluster of {partitions:,} partitions (demo profile, a {LONG_SESSION_MS // 1000} "
        f"s session) with a page open ({many['page']}):\n\n{cost}\n\n"
        "Then a follower paused while records go to some of the partitions it follows (their "
        "leaders drop it), and resumed (they take it back); each delay is from ZooKeeper's mtime "
        "of the partition's state znode to the moment the page's row showed the new ISR. All "
        "processes share the machine's 2 cores: in the burst the brokers, ZooKeeper, the "
        f"dashboard and the browser compete for them.\n\n{delays}"
    )
    figures = {
        "dashboard.throughput_ratio": ratio,
        f"dashboard.{partitions}.idle_cpu_pct": float(many["idle_cpu_pct"]),
        f"dashboard.{partitions}.delay_p99_ms": float(many["few.delay_p99_ms"]),
        f"dashboard.{partitions}.delay_max_ms": float(many["few.delay_max_ms"]),
        f"dashboard.{partitions}.burst_delay_p99_ms": float(many["burst.delay_p99_ms"]),
        f"dashboard.{partitions}.burst_changes": float(many["burst.changes"]),
    }
    return [Section(title="The live dashboard: its cost and its delay", markdown=markdown,
                    figures=figures)]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=5.0, help="each load run (5)")
    parser.add_argument("--rounds", type=int, default=12, help="pairs of load runs (12)")
    parser.add_argument("--partitions", type=int, default=1000, help="the big cluster (1000)")


def main(args: argparse.Namespace) -> None:
    for section in measure(args.seconds, args.rounds, args.partitions):
        print(f"## {section.title}\n\n{section.markdown}\n")
        for name, value in sorted(section.figures.items()):
            print(f"{name} = {value:g}")
