"""The chaos interface's Compose backend (`minibroker cluster ACTION TARGET --compose`, the
Docker SDK) on the real engine: every action, by node name and by role (the leader or a
follower of a partition, the active controller), changes the container as it says, the cluster
comes back healthy, and a mistake gets one line. Leaves every node running and healthy for the
next test."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pytest

from minibroker.core.types import TopicPartition
from minibroker.runtime.zk_store import ZkStore
from tests.compose import engine

pytestmark = [pytest.mark.compose, pytest.mark.integration]

TOPIC = "chaos"
OTHER = f"{engine.PROJECT}other"


def mb(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return engine.mb(*args, check=check, timeout=180)


def act(action: str, target: str) -> str:
    """`minibroker cluster ACTION TARGET --compose`; the node it acted on."""
    out = mb("cluster", action, target, "--compose", engine.PROJECT, "--zk", engine.ZK,
             "--topic", TOPIC).stdout  # fmt: skip
    m = re.match(rf"{action}: (\S+) \(", out)
    assert m, out
    return m.group(1)


def container(client: Any, node: str) -> Any:
    return engine.container_of(client, node)  # a fresh listing: status and attrs are current


def healthy() -> None:
    mb("cluster", "wait", "--compose", engine.PROJECT, "--timeout", "60")


def test_every_action_by_name_and_by_role(client: Any, up_seconds: float) -> None:
    mb("topics", "create", TOPIC, "--partitions", "1", "--replication-factor", "3", "--wait",
       "--zk", engine.ZK)  # fmt: skip
    zk = ZkStore(engine.ZK, session_timeout_ms=10_000)
    zk.start()

    def leader() -> str:
        state = zk.read_partition_state(TopicPartition(TOPIC, 0))
        assert state is not None
        return f"broker-{state.leader}"

    try:
        # A follower of chaos-0, by role: frozen, then thawed by name.
        follower = act("pause", "follower")
        assert follower.startswith("broker-") and follower != leader()
        assert container(client, follower).status == "paused"
        act("resume", follower)
        assert container(client, follower).status == "running"

        # Restart by name: a new life of the same container.
        before = container(client, "broker-1").attrs["State"]["StartedAt"]
        act("restart", "broker-1")
        assert container(client, "broker-1").attrs["State"]["StartedAt"] != before
        healthy()

        # The leader of chaos-0, by role: stopped (controlled shutdown), started by name.
        was_leader = leader()
        stopped = act("stop", "leader")
        assert stopped == was_leader
        assert container(client, stopped).status == "exited"
        act("start", stopped)
        assert container(client, stopped).status == "running"

        # The active controller, by role: killed, started by name (it comes back as standby).
        active = zk.read_controller()
        assert active is not None
        killed = act("kill", "controller")
        assert killed == f"controller-{active - 100}"
        assert container(client, killed).status == "exited"
        act("start", killed)
        healthy()

        # Mistakes: one line naming what is wrong and the fix, no traceback.
        for args, says in (
            (("start", "broker-1", "--compose", engine.PROJECT), "broker-1 is already running"),
            (("pause", "broker-9", "--compose", engine.PROJECT), "no node named 'broker-9'"),
            # Another cluster while this one holds the ports: who holds them, before `up`.
            (("up", "--compose", OTHER), f"of project {engine.PROJECT})"),
        ):
            r = mb("cluster", *args, check=False)
            assert r.returncode != 0 and says in r.stderr, r.stderr
            assert "Traceback" not in r.stderr and len(r.stderr.strip().splitlines()) == 1
        assert not [c.name for c in client.containers.list(all=True, filters={
            "label": f"{engine.PROJECT_LABEL}={OTHER}"})]  # fmt: skip
        # No engine at the socket: the same, for every compose command.
        r = subprocess.run(
            [sys.executable, "-m", "minibroker.cli.main", "cluster", "kill", "broker-1",
             "--compose", engine.PROJECT],
            capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL,
            env={**engine.cli_env(), "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
        )  # fmt: skip
        assert r.returncode != 0 and "Docker" in r.stderr and "Traceback" not in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    finally:
        zk.stop()
        healthy()
