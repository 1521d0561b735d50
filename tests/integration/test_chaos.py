"""The chaos interface's process backend on a real cluster: pause, resume, kill and start a
broker through `ProcessBackend`, then the same CLI the scenarios use, with an alias."""

from __future__ import annotations

import re

import pytest

from minibroker.chaos import ChaosError, ProcessBackend
from tests.integration.conftest import Cluster

pytestmark = pytest.mark.integration


def test_process_backend_pauses_resumes_kills_and_starts_a_broker(c: Cluster) -> None:
    backend = ProcessBackend(c.dir)
    assert backend.names() == [p.name for p in c.state.processes]
    assert backend.zk_connect == c.state.zk_connect
    old_pid = c.state.process("broker-3").pid
    backend.pause("broker-3")
    assert backend.state("broker-3") == "paused"
    backend.resume("broker-3")
    assert backend.state("broker-3") == "running"
    with pytest.raises(ChaosError, match="broker-3 is already running"):
        backend.start("broker-3")
    backend.kill("broker-3")
    assert backend.state("broker-3") == "dead"
    with pytest.raises(ChaosError, match="broker-3 is not running"):
        backend.pause("broker-3")
    backend.start("broker-3")
    assert backend.state("broker-3") == "running"
    assert c.reload().process("broker-3").pid != old_pid  # the state file has the new PID
    assert backend.describe("broker-3") == f"pid {c.state.process('broker-3').pid}"


def test_the_cli_pauses_the_follower_the_alias_names(c: Cluster) -> None:
    c.cli("topics", "create", "demo", "--partitions", "1", "--replication-factor", "3", "--wait")
    out = c.cli("cluster", "pause", "follower", "--topic", "demo").stdout
    m = re.fullmatch(r"pause: (broker-\d) \(in-sync follower of demo-0, pid \d+\)\n", out)
    assert m is not None, out
    victim = m[1]
    assert ProcessBackend(c.dir).state(victim) == "paused"
    out = c.cli("cluster", "resume", victim).stdout
    assert out.startswith(f"resume: {victim} (pid ")
    assert ProcessBackend(c.dir).state(victim) == "running"
    bad = c.cli("cluster", "kill", "leader", check=False)
    assert bad.returncode == 1
    assert bad.stderr == (
        "minibroker: 'leader' needs a topic: give --topic TOPIC (partition 0) or "
        "leader:TOPIC-PARTITION, e.g. leader:demo-0\n"
    )
