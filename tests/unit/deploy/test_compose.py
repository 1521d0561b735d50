"""deploy/docker-compose.yml without a Docker engine: generated from minibroker/topology.py,
valid against the compose specification's schema, and true to minibroker's own rules."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from minibroker import topology as t
from minibroker.runtime import zk_server
from tests.unit.deploy import compose_checks as cc

RULES: list[Callable[[cc.Compose], list[str]]] = [
    cc.reference_problems,
    cc.label_problems,
    cc.parity_problems,
    cc.port_problems,
    cc.volume_problems,
    cc.env_problems,
    cc.health_problems,
]


@pytest.fixture(scope="module")
def compose() -> cc.Compose:
    return cc.load()


def schema_errors(path: Path) -> str:
    """check-jsonschema's report against its vendored compose-spec schema ("" = valid)."""
    result = subprocess.run(
        [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]
        + [str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    return "" if result.returncode == 0 else result.stdout + result.stderr


def test_the_compose_file_is_what_the_topology_generates() -> None:
    result = subprocess.run(
        [sys.executable, str(cc.ROOT / "scripts" / "gen_compose.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_file_follows_the_compose_specification() -> None:
    assert schema_errors(cc.COMPOSE) == ""


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.__name__)
def test_rule(compose: cc.Compose, rule: Callable[[cc.Compose], list[str]]) -> None:
    assert rule(compose) == []


@pytest.mark.parametrize("profile", [None, "kafka"])
def test_every_program_accepts_its_command(compose: cc.Compose, profile: str | None) -> None:
    host_env = {"MINIBROKER_PROFILE": profile} if profile else {}
    # The profile variable reaches brokers and controllers only.
    only = {n.name for n in t.nodes()} if profile else None
    assert cc.program_problems(compose, host_env, only) == []


def test_every_declared_variable_is_read_by_the_code() -> None:
    strings = cc.source_strings()
    assert [name for name in t.ENVIRONMENT if name not in strings] == []


def test_every_variable_the_programs_read_is_declared() -> None:
    # MINIBROKER_DIR and the ZooKeeper class path concern process-mode clusters only;
    # MINIBROKER_COMPOSE picks the host's compose command (minibroker/chaos/compose_up.py).
    process_mode_only = {"MINIBROKER_DIR", "MINIBROKER_ZOOKEEPER_CLASSPATH", "MINIBROKER_COMPOSE"}
    read = {s for s in cc.source_strings() if s.startswith("MINIBROKER_") and s.isupper()}
    assert read - process_mode_only - set(t.ENVIRONMENT) == set()


def test_zookeeper_runs_as_in_process_mode(compose: cc.Compose, tmp_path: Path) -> None:
    cfg = zk_server.write_config(tmp_path, t.ZOOKEEPER_PORT).read_text()
    process = dict(line.split("=", 1) for line in cfg.splitlines() if "=" in line)
    text = (cc.ROOT / "deploy" / "zookeeper" / "zoo.cfg").read_text()
    lines = [line for line in text.splitlines() if "=" in line and not line.startswith("#")]
    container = dict(line.split("=", 1) for line in lines)
    # Where the data goes differs (volumes); the server settings do not.
    for key in ("dataDir", "dataLogDir", "clientPortAddress"):
        process.pop(key, None)
        container.pop(key, None)
    assert container == process
    assert compose["services"][t.ZOOKEEPER]["build"]["target"] == "zookeeper"


def test_the_project_is_named_minibroker_for_both_compose_implementations() -> None:
    # docker-compose 1.29 rejects a top-level `name:`; both read deploy/.env.
    env = (cc.ROOT / "deploy" / ".env").read_text().splitlines()
    assert "COMPOSE_PROJECT_NAME=minibroker" in env
