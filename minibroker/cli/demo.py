"""`minibroker demo`: a cluster's life in one run, each step printed as the command a user types.

Up → status → ZooKeeper tree → kill the active controller (the standby takes over with the
epoch one higher) → kill a broker (its znode goes when its session expires) → down.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from pathlib import Path

from minibroker import localcluster
from minibroker.core.zk_layout import BrokerIdZNode
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import wait_until

DEMO_DIR = ".minibroker-demo"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("demo", help="run the walk-through: cluster up, failovers, cluster down")
    p.add_argument("--dir", type=Path, default=Path(DEMO_DIR))
    p.set_defaults(func=cmd_demo)


def _step(title: str) -> None:
    print(f"\n=== {title}")


def _run(cli: Callable[[list[str]], int], argv: list[str]) -> None:
    print(f"$ minibroker {' '.join(argv)}", flush=True)
    code = cli(argv)
    if code != 0:
        raise localcluster.ClusterError(f"`minibroker {' '.join(argv)}` exited with {code}")


def cmd_demo(args: argparse.Namespace) -> int:
    from minibroker.cli.main import main as cli

    d: Path = args.dir
    dir_args = ["--dir", str(d)]
    session_ms = Settings.load(profile="demo").get_int("zookeeper.session.timeout.ms")
    _step("Start ZooKeeper, 3 brokers and 2 controllers as real processes")
    _run(cli, ["cluster", "up", *dir_args])
    try:
        state = localcluster.ClusterState.load(d)
        _step("Who is running, who is controller, which brokers are registered")
        _run(cli, ["cluster", "status", *dir_args])
        _step("The ZooKeeper tree: Kafka's znodes and JSON")
        _run(cli, ["zk", "tree", *dir_args])

        with localcluster.zk_session(state.zk_connect) as zk:
            active = zk.read_controller()
            epoch_before = (zk.read_controller_epoch() or (0, 0))[0]
            victim = next(p for p in state.by_role("controller") if p.id == active)
            _step(
                f"Controller failover: SIGKILL the active controller ({victim.name}); its "
                f"session expires after ~{session_ms} ms and the standby takes over"
            )
            killed_at = time.monotonic()
            _run(cli, ["cluster", "kill", victim.name, *dir_args])
            new_active = wait_until(
                lambda: (c := zk.read_controller()) is not None and c != active and c,
                timeout_s=session_ms / 1000 + 10,
                what="a new controller",
            )
            epoch_after = (zk.read_controller_epoch() or (0, 0))[0]
            print(
                f"controller {active} -> {new_active} after "
                f"{time.monotonic() - killed_at:.1f} s; /controller_epoch {epoch_before} -> "
                f"{epoch_after}"
            )
            _run(cli, ["cluster", "status", *dir_args])

            _step("Broker failure: SIGKILL broker-2; /brokers/ids/2 goes when its session expires")
            killed_at = time.monotonic()
            _run(cli, ["cluster", "kill", "broker-2", *dir_args])
            wait_until(
                lambda: zk.exists(BrokerIdZNode.path(2)) is None,
                timeout_s=session_ms / 1000 + 10,
                what="/brokers/ids/2 to disappear",
            )
            print(f"/brokers/ids/2 gone after {time.monotonic() - killed_at:.1f} s")
            _run(cli, ["zk", "tree", "--path", "/brokers/ids", *dir_args])
        _step("What happened, from every process's structured log")
        _run(
            cli,
            [
                "events",
                "--event",
                "controller_elected",
                "--event",
                "controller_resigned",
                "--event",
                "controller_standby",
                "--event",
                "broker_registered",
                *dir_args,
            ],
        )
    finally:
        _step("Stop everything")
        _run(cli, ["cluster", "down", *dir_args])
    print("\ndemo finished")
    return 0
