"""Bad input to the command line and the programs gets one clear line, never a traceback."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.conftest import Cluster, cli

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
