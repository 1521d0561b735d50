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
ON_DEMAND = ("loadgen", "spark-master", "spark-worker")  # compose's profiles: 0 replicas


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
    cluster = {t.ZOOKEEPER, "dashboard", *(n.name for n in t.nodes())}
    assert set(services) == cluster | set(ON_DEMAND)
    for name, service in services.items():
        deploy = service["deploy"]
        assert deploy["endpoint_mode"] == "dnsrr", name  # no IPVS needed
        if name in cluster:
            assert deploy["restart_policy"]["condition"] == "${MINIBROKER_SWARM_RESTART:-none}"
        assert all(p["mode"] == "host" for p in service.get("ports", [])), name
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


def test_the_load_generator_and_spark_wait_at_zero_replicas_and_spread_workers() -> None:
    services = cc.load(STACK)["services"]
    for name in ON_DEMAND:
        deploy = services[name]["deploy"]
        assert deploy["replicas"] == 0, name  # `docker service scale` starts them (SWARM.md)
        assert deploy["restart_policy"]["condition"] == "none", name  # a run ends, and stays
    worker = services["spark-worker"]
    assert worker["deploy"]["placement"] == {"max_replicas_per_node": 1}  # one per machine
    assert "volumes" not in worker  # no folder shared with the driver...
    assert "--ledger-on-driver" in services["loadgen"]["command"]  # ...so ledgers travel to it
    line = worker["entrypoint"][-1]  # the worker advertises its own address, not the service's
    assert "SPARK_LOCAL_IP=$$(hostname -i" in line and '--host "$$SPARK_LOCAL_IP"' in line
    assert "spark://spark-master:7077" in services["loadgen"]["command"]
