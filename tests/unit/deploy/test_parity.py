"""The process-mode cluster, minibroker/topology.py and deploy/docker-compose.yml describe one
cluster: the same nodes, ids and commands, and the same resolved settings except where a node
listens and stores (topology.DEPLOYMENT_SETTINGS)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker import localcluster
from minibroker import topology as t
from minibroker.runtime import zk_server
from tests.unit.deploy import compose_checks as cc


@pytest.fixture
def planned(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> localcluster.ClusterState:
    # plan() starts nothing; it only needs to know where ZooKeeper would come from.
    monkeypatch.setattr(
        zk_server, "find_zookeeper", lambda: zk_server.ZooKeeperInstall("java", "zk.jar")
    )
    return localcluster.plan(
        tmp_path,
        brokers=t.DEFAULT_BROKERS,
        controllers=t.DEFAULT_CONTROLLERS,
        overrides=[],
        profile="demo",
        zk_port=None,
        broker_port_base=None,
    )


def test_process_mode_runs_the_topology_nodes(planned: localcluster.ClusterState) -> None:
    got = [(p.name, p.role, p.id) for p in planned.processes]
    want: list[tuple[str, str, int | None]] = [(t.ZOOKEEPER, "zookeeper", None)]
    want += [(n.name, n.role, n.node_id) for n in t.nodes()]
    assert got == want


def test_process_mode_commands_come_from_the_topology(planned: localcluster.ClusterState) -> None:
    for n in t.nodes():
        p = planned.process(n.name)
        settings = t.process_settings(n, localcluster.HOST, p.port, p.metrics_port, p.kafka_port)
        args = t.node_args(n, str(Path(planned.dir) / n.name / "data"), settings)
        tail = ["--zk", planned.zk_connect, "--profile", "demo"]
        assert p.cmd == [sys.executable, "-m", n.program, *args, *tail]


def resolved(args: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
    return subprocess.Popen(
        [*args, "--check"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=base | env,
    )


def settings_of(proc: subprocess.Popen[str]) -> dict[str, str]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    settings: dict[str, str] = json.loads(out)["settings"]
    return settings


def test_both_deployments_resolve_the_same_settings(planned: localcluster.ClusterState) -> None:
    services = cc.load()["services"]
    runs = []
    for n in t.nodes():
        service = services[n.name]
        in_container = [sys.executable, *cc.argv(service)[1:]]
        env = cc.environment(service, {})
        runs.append((n, resolved(planned.process(n.name).cmd, {}), resolved(in_container, env)))
    for n, process_run, container_run in runs:
        a, b = settings_of(process_run), settings_of(container_run)
        differ = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        assert differ <= t.DEPLOYMENT_SETTINGS, f"{n.name}: {sorted(differ)}"


def test_every_port_of_the_topology_is_distinct() -> None:
    ports = [t.ZOOKEEPER_PORT]
    for n in t.nodes():
        ports += t.published_ports(n)
    assert len(ports) == len(set(ports))
    internal = {t.BROKER_INTERNAL_PORT, t.CONTROLLER_INTERNAL_PORT}
    assert not internal & set(ports)
    assert [n.node_id for n in t.nodes()] == [1, 2, 3, 101, 102]


def test_the_topology_is_pure_data() -> None:
    tree = ast.parse(Path(t.__file__).read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert imported <= {"__future__", "collections.abc", "dataclasses", "typing"}
