"""deploy/stack.yml without an engine: generated from the topology and the compose file's
services, valid against the compose specification, and placed and published as a swarm needs
(issue 40 §1)."""

from __future__ import annotations

import subprocess
import sys

from minibroker import topology as t
from tests.unit.deploy import compose_checks as cc
from tests.unit.deploy.test_compose import schema_errors

STACK = cc.ROOT / "deploy" / "stack.yml"


def test_the_stack_is_what_the_topology_generates() -> None:
    result = subprocess.run(
        [sys.executable, str(cc.ROOT / "scripts" / "gen_stack.py"), "--check"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_stack_follows_the_compose_specification() -> None:
    assert schema_errors(STACK) == ""


def test_zookeeper_brokers_and_controllers_run_where_labelled_and_publish_on_that_node() -> None:
    services = cc.load(STACK)["services"]
    assert set(services) == {t.ZOOKEEPER, "dashboard", *(n.name for n in t.nodes())}
    for name, service in services.items():
        deploy = service["deploy"]
        assert deploy["endpoint_mode"] == "dnsrr", name  # no IPVS needed
        assert deploy["restart_policy"]["condition"] == "${MINIBROKER_SWARM_RESTART:-none}"
        assert all(p["mode"] == "host" for p in service["ports"]), name
        assert "build" not in service and "depends_on" not in service, name
    for n in t.nodes():
        service = services[n.name]
        command = " ".join(service["command"].split())
        host = f"${{MINIBROKER_HOST_{n.name.upper().replace('-', '_')}:-127.0.0.1}}"
        assert f"EXTERNAL://{host}:{n.external_port}" in command
        assert f"INTERNAL://{n.name}:{n.internal_port}" in command
        assert "zookeeper.connection.timeout.ms=300000" in command  # no depends_on
        placed = service["deploy"].get("placement", {}).get("constraints", [])
        # Brokers for their data, controllers so that two never share (and die with) a machine.
        assert placed == [f"node.labels.minibroker.{n.name} == true"]
        if n.role == "broker":
            assert service["volumes"] == [f"{n.name}-data:{t.CONTAINER_DATA_DIR}"]
            assert f"KAFKA_EXTERNAL://{host}:{n.kafka_external_port}" in command
            # broker.rack: the machine, filled in by Swarm per task.
            assert service["environment"]["MINIBROKER_SETTINGS"].startswith(
                "broker.rack={{.Node.Hostname}} "
            )
    assert services[t.ZOOKEEPER]["deploy"]["placement"]["constraints"] == [
        "node.labels.minibroker.zookeeper == true"
    ]
