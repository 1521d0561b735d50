"""Time a process-mode cluster's start-up, controller failover and broker-znode expiry.

    .venv/bin/python bench/cluster_failover.py [--runs 5] [--profile demo]

Per run: `cluster up` until every broker is registered and a controller is elected; SIGKILL of
the active controller until the standby is in /controller; SIGKILL of broker-2 until
/brokers/ids/2 is gone. Prints each run and the medians (figures for BENCHMARKS.md).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from minibroker import localcluster
from minibroker.core.zk_layout import BrokerIdZNode
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import wait_until


def one_run(d: Path, profile: str) -> tuple[float, float, float]:
    t0 = time.monotonic()
    state = localcluster.up(d, profile=profile)
    up_s = time.monotonic() - t0
    session_s = Settings.load(profile=profile).get_int("zookeeper.session.timeout.ms") / 1000
    try:
        with localcluster.zk_session(state.zk_connect) as zk:
            active = zk.read_controller()
            victim = next(p for p in state.by_role("controller") if p.id == active)
            t0 = time.monotonic()
            localcluster.send(state, victim.name, "kill")
            wait_until(
                lambda: zk.read_controller() not in (None, active),
                timeout_s=session_s + 30,
                what="controller failover",
                interval_s=0.01,
            )
            failover_s = time.monotonic() - t0
            t0 = time.monotonic()
            localcluster.send(state, "broker-2", "kill")
            wait_until(
                lambda: zk.exists(BrokerIdZNode.path(2)) is None,
                timeout_s=session_s + 30,
                what="/brokers/ids/2 to go",
                interval_s=0.01,
            )
            expiry_s = time.monotonic() - t0
    finally:
        localcluster.down(state)
    return up_s, failover_s, expiry_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--profile", default="demo")
    args = parser.parse_args()
    session_ms = Settings.load(profile=args.profile).get_int("zookeeper.session.timeout.ms")
    print(f"profile {args.profile}: zookeeper.session.timeout.ms={session_ms}")
    print(f"{'run':>3}  {'cluster up':>10}  {'controller failover':>19}  {'broker znode gone':>17}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            row = one_run(Path(tmp) / f"run{i}", args.profile)
            rows.append(row)
            print(f"{i + 1:>3}  {row[0]:>9.2f}s  {row[1]:>18.2f}s  {row[2]:>16.2f}s", flush=True)
    medians = [statistics.median(col) for col in zip(*rows, strict=True)]
    print(f"med  {medians[0]:>9.2f}s  {medians[1]:>18.2f}s  {medians[2]:>16.2f}s")


if __name__ == "__main__":
    main()
