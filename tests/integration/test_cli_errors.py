"""Bad input to the command line and the programs gets one clear line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, cli, running_cluster

pytestmark = pytest.mark.integration


def test_unknown_property_is_named_with_a_suggestion(tmp_path: Path) -> None:
    r = cli(
        "cluster", "up", "--dir", str(tmp_path / "c"), "--set", "replica.lag.max.ms=1", check=False
    )
    assert r.returncode == 1
    assert "unknown property 'replica.lag.max.ms'" in r.stderr
    assert "Traceback" not in r.stderr


def test_commands_without_a_cluster_say_how_to_start_one(tmp_path: Path) -> None:
    r = cli("cluster", "status", "--dir", str(tmp_path / "none"), check=False)
    assert r.returncode == 1 and "minibroker cluster up" in r.stderr


def test_programs_reject_missing_ids_and_bad_values() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "broker"],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 2 and "broker id is required" in r.stderr
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "controller",
            "--id",
            "101",
            "--set",
            "zookeeper.session.timeout.ms=x",
        ],
        capture_output=True,
        text=True,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 1 and "expected an integer" in r.stderr


def test_broker_without_zookeeper_fails_with_a_clear_line(tmp_path: Path) -> None:
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "broker",
            "--id",
            "1",
            "--port",
            "0",
            "--zk",
            "127.0.0.1:1",
            "--log-dir",
            str(tmp_path),
            "--set",
            "zookeeper.connection.timeout.ms=1000",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert r.returncode == 1
    assert '"event":"broker_failed"' in r.stderr and "could not connect to ZooKeeper" in r.stderr


def test_second_up_in_a_running_dir_is_refused(c: Cluster) -> None:
    r = c.cli("cluster", "up", check=False)
    assert r.returncode == 1 and "already running" in r.stderr
    r = c.cli("cluster", "kill", "broker-9", check=False)
    assert r.returncode == 1 and "no process named 'broker-9'" in r.stderr


def test_pinned_ports_and_the_event_timeline(tmp_path: Path) -> None:
    from minibroker import localcluster

    # broker N listens on base+N-1: find a base whose next three ports are free
    zk_port = localcluster.free_ports(1)[0]
    base = next(
        b
        for b in localcluster.free_ports(20)
        if b != zk_port and all(localcluster.port_free(b + i) for i in range(3))
    )
    d = tmp_path / "pinned"
    pins = ["--zk-port", str(zk_port), "--broker-port-base", str(base)]
    with running_cluster(d, "--brokers", "3", "--controllers", "1", *pins) as state:
        assert state.zk_connect == f"127.0.0.1:{zk_port}"
        assert [p.port for p in state.by_role("broker")] == [base, base + 1, base + 2]
        out = cli("events", "--dir", str(d), "--event", "controller_elected").stdout
        assert "controller-1" in out and "(controller epoch 1)" in out
        regs = cli("events", "--dir", str(d), "--json", "--event", "broker_registered").stdout
        assert len(regs.splitlines()) == 3
