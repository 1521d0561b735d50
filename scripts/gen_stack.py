"""Write deploy/stack.yml, the cluster as a Docker Swarm stack, from minibroker/topology.py and
the compose file's own service definitions (scripts/gen_compose.py): one description, three
deployments (processes, compose, swarm). Or check that the committed file is what it would
write.

    python scripts/gen_stack.py          # rewrite it
    python scripts/gen_stack.py --check  # exit 1 when the committed file is stale

What a swarm needs that compose does not (deploy/SWARM.md says why):
- placement: ZooKeeper and each broker on the node labelled for it (`minibroker.zookeeper`,
  `minibroker.broker-N`: its volume lives on that node), each controller on its own labelled
  node (`minibroker.controller-N`: two on one machine would die together); the dashboard on a
  manager;
- published ports in host mode on the node that runs the task (the routing mesh would hand a
  Kafka client's connection to any broker), and DNS round robin endpoints (no virtual IPs:
  neither needs the kernel's IPVS, which some kernels, these machines' among them, lack);
- each node advertises its machine's address for clients outside the swarm
  (`MINIBROKER_HOST_<NODE>`, default 127.0.0.1: a one-machine swarm), its service name inside;
- no `depends_on`: brokers and controllers wait for ZooKeeper up to
  `zookeeper.connection.timeout.ms` instead;
- `restart_policy` none unless $MINIBROKER_SWARM_RESTART says `any` or `on-failure`;
- the load generator and Spark standalone at 0 replicas (compose has profiles, a stack has not):
  `docker service scale` starts them; the workers one per machine at most, each advertising its
  own address (a service name resolves to every task); the driver gets the executors' ledgers
  in their commit messages (--ledger-on-driver: the machines share no folder).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from compose_yaml import command_lines, emit
from gen_compose import (
    RUNS_DIR,
    SPARK_MASTER_PORT,
    SPARK_UI_PORTS,
    dashboard,
    loadgen,
    spark_master,
    spark_worker,
    zookeeper,
)

from minibroker import topology as t

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "deploy" / "stack.yml"
NETWORK = "minibroker"
ZK_WAIT_MS = 300_000  # how long a node waits for ZooKeeper when it starts (no depends_on)
RESTART = "${MINIBROKER_SWARM_RESTART:-none}"
RACK_SETTING = "broker.rack={{.Node.Hostname}}"


def host_ports(*ports: int) -> list[dict[str, Any]]:
    return [{"target": p, "published": p, "protocol": "tcp", "mode": "host"} for p in ports]


def deploy(constraint: str | None) -> dict[str, Any]:
    out: dict[str, Any] = {"endpoint_mode": "dnsrr"}
    if constraint:
        out["placement"] = {"constraints": [constraint]}
    out["restart_policy"] = {"condition": RESTART}
    return out


def label_constraint(name: str) -> str:
    return f"node.labels.minibroker.{name} == true"


def swarm_zookeeper() -> dict[str, Any]:
    service = zookeeper()
    del service["build"]
    service["ports"] = host_ports(t.ZOOKEEPER_PORT)
    return service | {"networks": [NETWORK], "deploy": deploy(label_constraint(t.ZOOKEEPER))}


def swarm_node(n: t.Node) -> dict[str, Any]:
    health = ["CMD", "minibroker", "health", f"127.0.0.1:{n.internal_port}"]
    if n.health_service:
        health += ["--service", n.health_service]
    host = f"${{{t.host_variable(n.name)}:-127.0.0.1}}"
    extra = {"zookeeper.connection.timeout.ms": str(ZK_WAIT_MS)}
    service: dict[str, Any] = {
        "image": t.RUNTIME_IMAGE,
        "hostname": n.name,
        "command": command_lines(t.container_command(n, host, extra)),
        "environment": t.container_environment(),
        "ports": host_ports(*t.published_ports(n)),
        "networks": [NETWORK],
    }
    if n.role == "broker":
        service["volumes"] = [f"{n.name}-data:{t.CONTAINER_DATA_DIR}"]
        # Kafka's broker.rack names the machine (Swarm fills the template in per task): it is
        # in the broker's registration, where the dashboard and Kafka clients read it.
        env = dict(service["environment"])
        env["MINIBROKER_SETTINGS"] = f"{RACK_SETTING} {env['MINIBROKER_SETTINGS']}"
        service["environment"] = env
    return service | {
        "labels": n.labels,
        "healthcheck": {
            "test": health,
            "interval": "3s",
            "timeout": "5s",
            "retries": 5,
            "start_period": "60s",
        },  # fmt: skip
        "stop_grace_period": "30s",
        # Brokers by label for their data; controllers by label so that Swarm cannot put both
        # on one machine (whose loss would then leave no controller at all).
        "deploy": deploy(label_constraint(n.name)),
    }


def swarm_dashboard() -> dict[str, Any]:
    service = dashboard()
    for key in ("build", "depends_on"):
        del service[key]
    service["ports"] = host_ports(t.DASHBOARD_PORT)
    return service | {"networks": [NETWORK], "deploy": deploy("node.role == manager")}


SPARK_WORKERS = 3  # what SWARM.md scales the workers to: one per machine
OWN_ADDRESS = "$$(hostname -i | cut -d ' ' -f 1)"  # the task's overlay address ($$: not Swarm's)


def on_demand(service: dict[str, Any], constraint: str | None, **extra: Any) -> dict[str, Any]:
    """A compose profile's service in the stack: no build, profiles or depends_on; 0 replicas
    until scaled; never restarted (a finished load generator run stays finished)."""
    for key in ("build", "profiles", "depends_on"):
        service.pop(key, None)
    placement: dict[str, Any] = {"constraints": [constraint]} if constraint else {}
    placement |= extra.pop("placement", {})
    out = {"endpoint_mode": "dnsrr", "replicas": 0, "restart_policy": {"condition": "none"}}
    if placement:
        out["placement"] = placement
    return service | {"networks": [NETWORK], "deploy": out} | extra


def swarm_spark_master() -> dict[str, Any]:
    service = spark_master()
    service["hostname"] = "spark-master"
    service["ports"] = host_ports(SPARK_UI_PORTS["spark-master"])
    return on_demand(service, "node.role == manager")


def swarm_spark_worker() -> dict[str, Any]:
    service = spark_worker()
    command = service.pop("command")
    host = command.index("--host")
    command[host + 1] = '"$$SPARK_LOCAL_IP"'
    # The worker and its executors bind to and advertise the task's own address.
    line = f"export SPARK_LOCAL_IP={OWN_ADDRESS}; exec spark-class " + " ".join(
        ["org.apache.spark.deploy.worker.Worker", *command]
    )
    service["entrypoint"] = ["sh", "-c", line]
    service["ports"] = host_ports(SPARK_UI_PORTS["spark-worker"])
    del service["volumes"]  # no ledger folder: the executors send their ledgers to the driver
    return on_demand(service, None, placement={"max_replicas_per_node": 1})


def swarm_loadgen() -> dict[str, Any]:
    service = loadgen(t.nodes())
    master = f"spark://spark-master:{SPARK_MASTER_PORT}"
    service["command"] = ["--records", "100000", "--master", master]
    service["command"] += ["--tasks", str(2 * SPARK_WORKERS), "--ledger-on-driver"]
    service["volumes"] = [f"loadgen-runs:{RUNS_DIR}"]
    return on_demand(service, "node.role == manager")


def stack() -> dict[str, Any]:
    nodes = t.nodes()
    services: dict[str, Any] = {t.ZOOKEEPER: swarm_zookeeper()}
    services |= {n.name: swarm_node(n) for n in nodes}
    services["dashboard"] = swarm_dashboard()
    services["loadgen"] = swarm_loadgen()
    services["spark-master"] = swarm_spark_master()
    services["spark-worker"] = swarm_spark_worker()
    volumes = ["zookeeper-data", "zookeeper-datalog", "loadgen-runs"]
    volumes += [f"{n.name}-data" for n in nodes if n.role == "broker"]
    return {
        "version": "3.8",
        "services": services,
        "networks": {NETWORK: {"driver": "overlay", "attachable": True}},
        "volumes": {v: {} for v in volumes},
    }


def header() -> list[str]:
    hosts = ", ".join(t.host_variable(n.name) for n in t.nodes())
    return [
        "# GENERATED by scripts/gen_stack.py from minibroker/topology.py and the compose file's",
        "# services. Do not edit: change those and run `python scripts/gen_stack.py`.",
        "#",
        "#   docker stack deploy -c deploy/stack.yml minibroker   # walkthrough: deploy/SWARM.md",
        "#",
        "# Before deploying, label the nodes: ZooKeeper, each broker and each controller run where",
        "# their label is (ZooKeeper's and a broker's data live in that node's volumes; the two",
        "# controllers belong on different nodes):",
        "#   docker node update --label-add minibroker.zookeeper=true NODE",
        "#   docker node update --label-add minibroker.broker-1=true NODE   (broker-2, broker-3)",
        "#   docker node update --label-add minibroker.controller-1=true NODE   (controller-2)",
        "# Ports are published in host mode on the node that runs each task (not 127.0.0.1 only).",
        f"# Clients outside the swarm reach each node at the address in {hosts}",
        "# (default 127.0.0.1: a one-machine swarm). MINIBROKER_SWARM_RESTART=any lets Swarm",
        "# restart a killed node (default none: a killed broker stays dead, as in compose).",
        "",
    ]


def render() -> str:
    return "\n".join([*header(), *emit(stack(), {})]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check freshness")
    args = parser.parse_args()
    name = OUT.relative_to(ROOT)
    text = render()
    if not args.check:
        OUT.write_text(text)
        print(f"wrote {name}")
        return 0
    if not OUT.exists() or OUT.read_text() != text:
        print(f"{name} is stale; run: python scripts/gen_stack.py")
        return 1
    print(f"{name} is fresh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
