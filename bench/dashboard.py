"""`python -m bench dashboard [--seconds 10] [--rounds 3] [--partitions 1000]`: what the live
dashboard costs the cluster, and how fast a change reaches its page.

1. **Produce throughput with the dashboard open and without**: the load benchmark's cluster
   (3 brokers, RF 3, one partition led by each, Kafka's timings) and its Producer case (Kafka's
   defaults, acks=all, 100 B records) for `seconds` a run; `rounds` pairs of runs, one without
   and one with a `minibroker dashboard --dir` process and a page open on it, in alternating
   order so that drift hits both; the medians compared.
2. **N partitions x RF 3** (demo profile): with a page open on a quiet cluster, the dashboard
   process's CPU and RSS (and the page's own CPU); then a follower is paused (its leaders drop
   it from about two thirds of the ISRs) and resumed (it comes back), and for every changed
   partition the time from its state znode's mtime (ZooKeeper's clock) to the moment the page's
   row showed the new ISR (the page's clock: the same machine's).

The page is headless Debian chromium when installed, else a Server-Sent Events reader.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
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
from minibroker.client import admin_zk
from minibroker.core.types import LeaderAndIsr
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import Stat, ZkStore

SETTLE_S = 5.0
IDLE_WINDOW_S = 15.0
RECORD_BYTES = 100


# ---- 1. throughput with and without the dashboard ---------------------------------------------


def _producer_rate(cluster: Cluster, seconds: float) -> float:
    return asyncio.run(client_built(cluster, -1, RECORD_BYTES, seconds)).records_per_s


def throughput(seconds: float, rounds: int, logs: Path) -> tuple[list[float], list[float], str]:
    """Records/s of each run without and with the dashboard open, and what the page was."""
    without: list[float] = []
    with_page: list[float] = []
    kind = ""
    with running_cluster(partitions=3) as cluster:
        _producer_rate(cluster, 1.0)  # warm-up: connections, first segment pages

        def opened() -> None:
            nonlocal kind
            with dashboard_process(cluster.state.dir, logs / "dashboard-load.log") as (_p, url):
                page = open_page(url)
                kind = page.kind
                try:
                    wait_until(lambda: page.rows() == 3, timeout_s=30, what="the page's rows")
                    with_page.append(_producer_rate(cluster, seconds))
                finally:
                    page.close()

        for i in range(rounds):
            runs: list[Callable[[], None]] = [
                lambda: without.append(_producer_rate(cluster, seconds)),
                opened,
            ]
            for run in runs if i % 2 == 0 else reversed(runs):
                run()
            print(f"  round {i + 1}: without {without[-1]:,.0f}, with {with_page[-1]:,.0f} rec/s")
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
    page: Page,
    zk: ZkStore,
    before: States,
    isr_of: Callable[[tuple[int, ...]], bool],
) -> tuple[list[float], States]:
    """Once every partition's ISR in ZooKeeper satisfies `isr_of` and the page showed each
    change: the delay of each partition whose ISR changed (page time - state znode mtime), and
    the states now."""

    def settled() -> States | None:
        states = read_states(zk, before)
        return states if all(isr_of(tuple(s.isr)) for s, _stat in states.values()) else None

    after = wait_until(settled, timeout_s=60, what="the ISR change in ZooKeeper", interval_s=0.2)
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
    state = localcluster.up(cluster_dir / "cluster", profile="demo")
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
                    out.update(_pause_and_resume(state, zk, page, partitions))
                finally:
                    page.close()
    finally:
        localcluster.down(state)
        shutil.rmtree(cluster_dir, ignore_errors=True)
    return out


def _pause_and_resume(
    state: localcluster.ClusterState, zk: ZkStore, page: Page, partitions: int
) -> dict[str, float | str]:
    follower = state.by_role("broker")[-1]
    fid = follower.id
    before = read_states(zk, range(partitions))
    page.seen()  # from here on
    localcluster.send(state, follower.name, "pause")
    try:
        shrink, shrunk = _change_delays_ms(page, zk, before, lambda isr: fid not in isr)
    finally:
        localcluster.send(state, follower.name, "resume")
    expand, _ = _change_delays_ms(page, zk, shrunk, lambda isr: len(isr) == REPLICATION_FACTOR)
    delays = sorted(shrink + expand)
    return {
        "changes": float(len(delays)),
        "shrinks": float(len(shrink)),
        "expands": float(len(expand)),
        "delay_median_ms": statistics.median(delays),
        "delay_p99_ms": delays[min(len(delays) - 1, int(len(delays) * 0.99))],
        "delay_max_ms": delays[-1],
    }


# ---- the report ----------------------------------------------------------------------------------


def measure(seconds: float = 10.0, rounds: int = 3, partitions: int = 1000) -> list[Section]:
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
    scale = md_table(
        [
            "partitions",
            "rows on the page",
            "dashboard CPU idle",
            "dashboard RSS",
            "page CPU idle",
            "ISR changes timed",
            "znode → page median",
            "p99",
            "max",
        ],  # fmt: skip
        [
            (
                f"{partitions:,} × RF 3",
                f"{float(many['render_s']):.1f} s",
                f"{float(many['idle_cpu_pct']):.1f}%",
                f"{float(many['rss_mb']):.0f} MB",
                "-" if page_cpu is None else f"{float(page_cpu):.1f}%",
                f"{float(many['shrinks']):.0f} shrinks + {float(many['expands']):.0f} expands",
                f"{float(many['delay_median_ms']):.0f} ms",
                f"{float(many['delay_p99_ms']):.0f} ms",
                f"{float(many['delay_max_ms']):.0f} ms",
            )
        ],
    )
    markdown = (
        f"Producer (Kafka's defaults), acks=all, {RECORD_BYTES} B records, {seconds:g} s a run, "
        f"3 brokers RF 3; the page: {kind}. With ÷ without (medians): **{ratio:.3f}**.\n\n"
        f"{runs}\n\n"
        f"A quiet cluster of {partitions:,} partitions (demo profile) with the page open "
        f"({many['page']}); then a follower paused and resumed: for each partition whose ISR "
        f"changed, ZooKeeper's mtime of its state znode → the page's row showing the new "
        f"ISR.\n\n{scale}"
    )
    figures = {
        "dashboard.throughput_ratio": ratio,
        f"dashboard.{partitions}.idle_cpu_pct": float(many["idle_cpu_pct"]),
        f"dashboard.{partitions}.delay_p99_ms": float(many["delay_p99_ms"]),
        f"dashboard.{partitions}.delay_max_ms": float(many["delay_max_ms"]),
    }
    return [Section(title="The live dashboard: its cost and its delay", markdown=markdown,
                    figures=figures)]  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seconds", type=float, default=10.0, help="each load run (10)")
    parser.add_argument("--rounds", type=int, default=3, help="pairs of load runs (3)")
    parser.add_argument("--partitions", type=int, default=1000, help="the big cluster (1000)")


def main(args: argparse.Namespace) -> None:
    for section in measure(args.seconds, args.rounds, args.partitions):
        print(f"## {section.title}\n\n{section.markdown}\n")
        for name, value in sorted(section.figures.items()):
            print(f"{name} = {value:g}")
