"""`minibroker demo`: the seeds' story on a real cluster, each step printed as the command a
user would type, with what happened and how long it took.

Cluster up → a topic (RF 3, min.insync.replicas 2) under an acks=all producer → pause a follower
(the leader shrinks the ISR, writes an isr_change node, the controller sends UpdateMetadata) →
resume it (it catches up and is added back) → kill the leader (the controller elects the first
live ISR replica) → kill the active controller (the standby takes over) → check that no
acknowledged record was lost → cluster down.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from minibroker import localcluster
from minibroker.client import Producer
from minibroker.client.read_back import read_partition
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.runtime.logging import parse_line
from minibroker.runtime.waiting import wait_until
from minibroker.topology import DASHBOARD_PORT

DEMO_DIR = ".minibroker-demo"
TOPIC = "seeds"
TP = TopicPartition(TOPIC, 0)


def add_parser(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], cli: Callable[[list[str]], int]
) -> None:
    p = sub.add_parser("demo", help="the seeds' story on a real cluster, with timings")
    p.add_argument("--dir", type=Path, default=Path(DEMO_DIR))
    p.add_argument(
        "--dashboard",
        type=int,
        default=DASHBOARD_PORT,
        metavar="PORT",
        help=f"watch it live at http://127.0.0.1:PORT/ ({DASHBOARD_PORT}; a free port when that "
        "one is taken; 0: no dashboard)",
    )
    p.set_defaults(func=functools.partial(cmd_demo, cli=cli))


def _step(title: str) -> None:
    print(f"\n=== {title}", flush=True)


def _note(text: str) -> None:
    print(f"--> {text}", flush=True)


class Demo:
    def __init__(self, cli: Callable[[list[str]], int], d: Path) -> None:
        self.cli = cli
        self.dir = d
        self.dir_args = ["--dir", str(d)]

    def run(self, *argv: str) -> None:
        args = [*argv, *self.dir_args]
        print(f"$ minibroker {' '.join(args)}", flush=True)
        code = self.cli(args)
        if code != 0:
            raise localcluster.ClusterError(f"`minibroker {' '.join(args)}` exited with {code}")

    @property
    def state(self) -> localcluster.ClusterState:
        return localcluster.ClusterState.load(self.dir)

    def events(self, name: str, event: str) -> list[dict[str, Any]]:
        text = Path(self.state.process(name).log_file).read_text(errors="replace")
        return [e for e in map(parse_line, text.splitlines()) if e and e["event"] == event]


class BackgroundProducer:
    """An acks=all producer writing one record every few ms until stopped."""

    def __init__(self, bootstrap: list[str]) -> None:
        self.bootstrap = bootstrap
        self.acked: dict[int, bytes] = {}
        self.errors = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        async with Producer(self.bootstrap, acks=-1, linger_ms=1) as producer:
            i = 0
            while not self._stop.is_set():
                value = b"record-%d" % i
                try:
                    md = await producer.send_and_wait(TOPIC, value, partition=0)
                    self.acked[md.offset] = value
                except Exception:
                    self.errors += 1
                i += 1
                await asyncio.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


def _dashboard_port(wanted: int) -> int:
    """`wanted`, or a free port when something else holds it (0: no dashboard)."""
    if wanted == 0 or localcluster.port_free(wanted):
        return wanted
    (port,) = localcluster.free_ports(1)
    return port


def cmd_demo(args: argparse.Namespace, *, cli: Callable[[list[str]], int]) -> int:
    """The demo, running each step through `cli` (the `minibroker` command's entry point, handed
    in by it: CLIs are leaves that nothing imports)."""
    demo = Demo(cli, args.dir)
    _step("Start ZooKeeper, 3 brokers and 2 controllers as real processes")
    port = _dashboard_port(args.dashboard)
    demo.run("cluster", "up", *(["--dashboard", str(port)] if port else []))
    if port:
        _note(f"watch it live in a browser: http://127.0.0.1:{port}/ (the live dashboard)")
    try:
        _story(demo)
    finally:
        _step("Stop everything")
        demo.run("cluster", "down")
    print("\ndemo finished")
    return 0


def _story(demo: Demo) -> None:
    state = demo.state
    demo.run("cluster", "status")
    _step("Create a topic: 1 partition on all 3 brokers, min.insync.replicas=2")
    demo.run(
        "topics",
        "create",
        TOPIC,
        "--partitions",
        "1",
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
        "--wait",
    )
    demo.run("zk", "tree", "--path", f"/brokers/topics/{TOPIC}")
    print(
        f"$ seq 3 | sed 's/^/hello /' | minibroker produce {TOPIC} --acks all --json "
        f"--dir {demo.dir}",
        flush=True,
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "minibroker.cli.main",
            "produce",
            TOPIC,
            "--acks",
            "all",
            "--json",
            *demo.dir_args,
        ],
        input="hello 1\nhello 2\nhello 3\n",
        text=True,
        check=True,
    )
    brokers = [p.address for p in state.by_role("broker")]
    load = BackgroundProducer(brokers)
    _note("an acks=all producer now writes a record every few milliseconds in the background")
    with localcluster.zk_session(state.zk_connect) as zk:

        def partition_state() -> LeaderAndIsr:
            s = zk.read_partition_state(TP)
            assert s is not None
            return s

        wait_until(lambda: len(load.acked) >= 20, timeout_s=30, what="the first acks")
        demo.run("topics", "describe", TOPIC)
        leader = partition_state().leader
        follower = max(b for b in (1, 2, 3) if b != leader)
        _step(f"Pause follower broker-{follower} (SIGSTOP): it stops fetching")
        paused_at = time.monotonic()
        demo.run("cluster", "pause", f"broker-{follower}")
        wait_until(
            lambda: follower not in partition_state().isr, timeout_s=30, what="the ISR shrink"
        )
        _note(
            f"leader broker-{leader} removed broker-{follower} from the ISR after "
            f"{time.monotonic() - paused_at:.1f} s: state znode {partition_state()}"
        )
        created = wait_until(
            lambda: demo.events(f"broker-{leader}", "isr_change_notification_created"),
            timeout_s=30,
            what="the isr_change node",
        )
        _note(
            f"broker-{leader} wrote {created[-1]['path']} "
            f"{time.monotonic() - paused_at:.1f} s after the pause (5 s quiet period)"
        )
        active = next(p.name for p in state.by_role("controller") if p.id == zk.read_controller())
        wait_until(
            lambda: demo.events(active, "isr_change_processed"),
            timeout_s=30,
            what="the controller to process it",
        )
        _note(
            f"{active} read it, sent UpdateMetadata to every broker and deleted it "
            f"({time.monotonic() - paused_at:.1f} s after the pause)"
        )
        demo.run("topics", "describe", TOPIC)
        _step(f"Resume broker-{follower} (SIGCONT): it catches up and is added back")
        resumed_at = time.monotonic()
        demo.run("cluster", "resume", f"broker-{follower}")
        wait_until(lambda: follower in partition_state().isr, timeout_s=60, what="the ISR expand")
        _note(f"back in the ISR after {time.monotonic() - resumed_at:.1f} s: {partition_state()}")
        demo.run("topics", "describe", TOPIC)

        before = partition_state()
        _step(f"Kill the leader broker-{before.leader} (SIGKILL): its session must expire")
        killed_at = time.monotonic()
        demo.run("cluster", "kill", f"broker-{before.leader}")

        def new_leader() -> LeaderAndIsr | None:
            s = partition_state()
            return s if s.leader not in (before.leader, -1) else None

        after = wait_until(new_leader, timeout_s=60, what="a new leader")
        _note(
            f"the controller elected broker-{after.leader} (first live ISR replica in "
            f"assignment order) after {time.monotonic() - killed_at:.1f} s: {after}"
        )
        count = len(load.acked)
        wait_until(lambda: len(load.acked) > count + 20, timeout_s=60, what="more acks")
        _note(f"the producer goes on: {len(load.acked)} records acknowledged so far")
        demo.run("topics", "describe", TOPIC)

        _step("Kill the active controller: the standby takes over with the epoch one higher")
        ctrl = next(p for p in state.by_role("controller") if p.id == zk.read_controller())
        epoch = (zk.read_controller_epoch() or (0, 0))[0]
        killed_at = time.monotonic()
        demo.run("cluster", "kill", ctrl.name)
        wait_until(
            lambda: zk.read_controller() not in (None, ctrl.id), timeout_s=60, what="the standby"
        )
        _note(
            f"controller {ctrl.id} -> {zk.read_controller()} after "
            f"{time.monotonic() - killed_at:.1f} s; /controller_epoch {epoch} -> "
            f"{(zk.read_controller_epoch() or (0, 0))[0]}"
        )
    load.stop()
    _step("Read everything back and check every acknowledged record")
    alive = [p.address for p in demo.state.by_role("broker") if localcluster.is_alive(p)]
    got = asyncio.run(read_partition(alive, TP))
    lost = [o for o, v in load.acked.items() if got.get(o) != v]
    _note(
        f"{len(load.acked)} records acknowledged with acks=all, {len(lost)} lost, "
        f"{load.errors} sends failed and were not acknowledged"
    )
    if lost:
        raise localcluster.ClusterError(f"acknowledged records lost at offsets {lost[:10]}")
    demo.run(
        "events",
        "--event",
        "isr_shrink",
        "--event",
        "isr_expand",
        "--event",
        "isr_change_notification_created",
        "--event",
        "isr_change_processed",
        "--event",
        "leader_elected",
        "--event",
        "controller_elected",
    )
