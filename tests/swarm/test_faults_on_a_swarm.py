"""Faults on a swarm (issue 40 §1 and §2), with an acks=all writer recorded for the history
checker through each:
- on a broker's task, wherever it runs, through `minibroker cluster ... --swarm` (deploy/SWARM.md's
  blocks: kill, start, drain and activate its machine; and isolate, heal, pause, resume,
  stop), and a kill under restart policy `any` (Swarm's own new task, with the broker's data);
- on a machine: cut from the other machines (the seeds' story across machines: the leader's
  machine loses ZooKeeper and its followers, clients still reach it)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from minibroker.runtime.waiting import wait_until
from tests.swarm.conftest import Swarm
from tests.swarm.writes import (
    all_in_sync,
    read_back_and_check,
    wait_partitions,
    without,
    writes_through,
)


def mb(swarm: Swarm, *args: str) -> str:
    """`minibroker ARGS` in the reader's shell (SWARM.md's variables set)."""
    done = subprocess.run(
        ["minibroker", *args], env=swarm.env, capture_output=True, text=True, timeout=300,
        check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"minibroker {' '.join(args)}: {done.stdout}{done.stderr}"
    return done.stdout


def failed_tasks(swarm: Swarm, service: str) -> list[str]:
    """The containers of the service's tasks that Swarm saw fail (a kill: exit code 137)."""
    tasks = swarm.stack.service(service).tasks()
    return [
        (x["Status"].get("ContainerStatus") or {}).get("ContainerID", "")
        for x in tasks
        if x["Status"]["State"] == "failed"
    ]


def test_faults_on_a_brokers_task_wherever_it_runs(swarm: Swarm, tmp_path: Path) -> None:
    topic = "tasks"
    with writes_through(swarm, topic, tmp_path):
        swarm.block("swarm-kill")  # broker-2's task's container, on node-2's engine
        assert swarm.backend.state("broker-2") == "dead"
        wait_partitions(swarm, topic, without(2), "leaders and ISRs off the killed broker 2", 60)
        swarm.block("swarm-start")  # a new task, on node-2, with its volume
        wait_partitions(swarm, topic, all_in_sync, "broker 2 back in every ISR", 120)
        assert swarm.stack.task("broker-2").node == "node-2"

        print(mb(swarm, "cluster", "isolate", "broker-3", "--swarm"))
        wait_partitions(swarm, topic, without(3), "leaders and ISRs off the isolated broker 3", 60)
        print(mb(swarm, "cluster", "heal", "broker-3", "--swarm"))
        wait_partitions(swarm, topic, all_in_sync, "broker 3 back in every ISR", 120)

        mb(swarm, "cluster", "pause", "broker-1", "--swarm")
        assert swarm.backend.state("broker-1") == "paused"
        mb(swarm, "cluster", "resume", "broker-1", "--swarm")
        assert swarm.backend.state("broker-1") == "running"

        mb(swarm, "cluster", "stop", "broker-2", "--swarm")  # SIGTERM: a controlled shutdown
        assert swarm.backend.state("broker-2") == "dead"
        wait_partitions(swarm, topic, without(2), "leaders and ISRs off the stopped broker 2", 60)
        mb(swarm, "cluster", "start", "broker-2", "--swarm")
        wait_partitions(swarm, topic, all_in_sync, "broker 2 back in every ISR", 120)

        # Restart policy any, for broker 1: the kill is followed by Swarm's own new task.
        failed_before = failed_tasks(swarm, "broker-1")
        swarm.block("swarm-restart-any", timeout=300)
        wait_until(
            lambda: len(failed_tasks(swarm, "broker-1")) > len(failed_before)
            and swarm.stack.task("broker-1").state == "running",
            timeout_s=90, what="Swarm's new task for the killed broker 1",
        )  # fmt: skip
        restarted = swarm.stack.task("broker-1")
        assert restarted.node == "node-1" and restarted.container not in failed_tasks(
            swarm, "broker-1"
        )
        wait_partitions(swarm, topic, all_in_sync, "broker 1 back in every ISR", 120)
        log = swarm.stack.container("broker-1").logs().decode(errors="replace")
        opened = [json.loads(line) for line in log.splitlines() if '"log_opened"' in line]
        assert any(e["tp"].startswith(topic) and e["log_end_offset"] > 0 for e in opened), (
            "Swarm's new task for broker 1 did not open its log with its data"
        )
        swarm.block("swarm-restart-none", timeout=300)  # itself one more new task
        wait_partitions(swarm, topic, all_in_sync, "broker 1 back in every ISR", 120)

        swarm.block("swarm-drain")  # node-3: broker 3's task is shut down cleanly
        wait_partitions(swarm, topic, without(3), "leaders and ISRs off drained broker 3", 90)
        wait_until(
            lambda: swarm.stack.task("broker-3").state == "shutdown",
            timeout_s=60, what="broker 3's task shut down (and not replaced)",
        )  # fmt: skip
        status = mb(swarm, "cluster", "status", "--swarm")
        rows = [line.split()[:3] for line in status.splitlines()]
        assert ["broker-3", "node-3", "shutdown"] in rows, status
        assert swarm.backend.state("controller-2") == "dead"  # drained with it
        swarm.block("swarm-activate")  # and both started again
        wait_partitions(swarm, topic, all_in_sync, "broker 3 back in every ISR", 120)
        assert swarm.stack.task("broker-3").node == "node-3"
        wait_until(
            lambda: swarm.backend.state("controller-2") == "running",
            timeout_s=60, what="controller-2 running again",
        )  # fmt: skip
    read_back_and_check(swarm, topic, tmp_path)


def test_a_machine_cut_from_the_others(swarm: Swarm, tmp_path: Path) -> None:
    topic = "cut"
    manager = swarm.stack.manager
    with writes_through(swarm, topic, tmp_path):
        started = time.monotonic()
        print(mb(swarm, "swarm", "lab", "cut", "node-2"))  # the host (clients) still reaches it
        try:
            wait_partitions(
                swarm, topic, without(2), "leaders and ISRs off the cut-off broker 2", 60
            )
            moved_after = time.monotonic() - started
            # Swarm's managers stop hearing node-2, mark it Down and give up its tasks.
            wait_until(
                lambda: manager.nodes.get("node-2").attrs["Status"]["State"] == "down",
                timeout_s=60, what="the swarm marking node-2 Down",
            )  # fmt: skip
            down_after = time.monotonic() - started
            assert swarm.backend.state("broker-2") == "running"  # cut off, not dead
        finally:
            print(mb(swarm, "swarm", "lab", "heal", "node-2"))
        # Back in touch, node-2 is told to shut its given-up tasks down (restart_policy none):
        # broker 2 and controller 1 end there, and are started again as new tasks.
        wait_until(
            lambda: swarm.backend.state("broker-2") == "dead",
            timeout_s=60, what="Swarm shutting down broker-2's given-up task",
        )  # fmt: skip
        wait_until(
            lambda: swarm.backend.state("controller-1") == "dead",
            timeout_s=60, what="Swarm shutting down controller-1's given-up task (node-2's)",
        )  # fmt: skip
        mb(swarm, "cluster", "start", "broker-2", "--swarm")
        mb(swarm, "cluster", "start", "controller-1", "--swarm")
        wait_partitions(swarm, topic, all_in_sync, "broker 2 back in every ISR", 180)
        wait_until(
            lambda: swarm.backend.state("controller-1") == "running",
            timeout_s=60, what="controller-1 running again",
        )  # fmt: skip
    acked = read_back_and_check(swarm, topic, tmp_path)
    print(
        f"leaders moved {moved_after:.1f} s after the cut, node-2 Down after {down_after:.1f} s; "
        f"{acked} acknowledged"
    )
