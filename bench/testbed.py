"""The test bed's start-up (issue 39: a cluster in a test's fixture in seconds): how long
`minibroker.testing.Cluster` takes from `up()` until every broker is registered and a
controller elected, and `down()` until no process is left, over several runs, with and
without the fault proxy, and the CPU it costs the machine."""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.common import md_table

CONFIGS: tuple[tuple[str, bool], ...] = (
    ("3 brokers, 2 controllers", False),
    ("the same behind the fault proxy", True),
)


def _cpu_s() -> float:
    """CPU seconds of this process's children that ended, and its own."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def measure(runs: int = 5) -> str:
    from minibroker.testing import Cluster

    rows = []
    for name, proxy in CONFIGS:
        ups, downs, cpus = [], [], []
        for _ in range(runs):
            cpu = _cpu_s()
            started = time.perf_counter()
            cluster = Cluster(proxy=proxy).up()
            up = time.perf_counter()
            cluster.down()
            ups.append(up - started)
            downs.append(time.perf_counter() - up)
            cpus.append(_cpu_s() - cpu)
        rows.append((
            name, f"{statistics.median(ups):.2f} s ({min(ups):.2f}–{max(ups):.2f})",
            f"{statistics.median(downs):.2f} s", f"{statistics.median(cpus):.1f}",
        ))  # fmt: skip
    header = ["cluster", f"up, median of {runs} (range)", "down",
              "CPU-s a run (this process and the children it reaped)"]  # fmt: skip
    return md_table(header, rows)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="clusters per configuration")


def main(args: argparse.Namespace) -> None:
    print(measure(args.runs))
