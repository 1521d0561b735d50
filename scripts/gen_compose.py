"""Write deploy/docker-compose.yml and its secure profile, deploy/docker-compose.secure.yml,
from minibroker/topology.py (the one cluster description the process-mode cluster uses too), or
check that the committed files are what it would write.

    python scripts/gen_compose.py          # rewrite both
    python scripts/gen_compose.py --check  # exit 1 when a committed file is stale
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from compose_yaml import command_lines, emit

from minibroker import topology as t
from minibroker.localcluster import secure_compose as sc

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "deploy" / "docker-compose.yml"
SECURE_OUT = ROOT / "deploy" / "docker-compose.secure.yml"
IMAGE = t.RUNTIME_IMAGE
LOADGEN_IMAGE = t.LOADGEN_IMAGE
ZOOKEEPER_IMAGE = t.ZOOKEEPER_IMAGE
NETFAULT_IMAGE = t.NETFAULT_IMAGE
HOME = "/home/minibroker"
RUNS_DIR = f"{HOME}/loadgen-runs"
HOST_RUNS = "./loadgen-runs"  # next to the compose file: deploy/loadgen-runs
SPARK_MASTER_PORT = 7077
SPARK_UI_PORTS = {"spark-master": 8080, "spark-worker": 8081}
HEALTH_TIMING = {"interval": "3s", "timeout": "5s", "retries": 5, "start_period": "60s"}


def build(target: str) -> dict[str, str]:
    return {"context": "..", "dockerfile": "deploy/Dockerfile", "target": target}


def healthy(*services: str) -> dict[str, dict[str, str]]:
    return {s: {"condition": "service_healthy"} for s in services}


def published(*ports: int) -> list[str]:
    # Loopback only, and the same port inside: advertised addresses must work from the host.
    return [f"127.0.0.1:{p}:{p}" for p in ports]


def zookeeper() -> dict[str, Any]:
    # Configured as the process-mode ZooKeeper (runtime/zk_server.py): deploy/zookeeper/zoo.cfg.
    return {
        "image": ZOOKEEPER_IMAGE,
        "build": build("zookeeper"),
        "ports": published(t.ZOOKEEPER_PORT),
        "volumes": ["zookeeper-data:/data", "zookeeper-datalog:/datalog"],
        "labels": {t.ROLE_LABEL: "zookeeper"},
        "healthcheck": {
            # `ruok` answered `imok` (deploy/zookeeper/ruok.py; the image has Python).
            "test": ["CMD", "python3", "/usr/local/bin/zk-ruok"],
            **HEALTH_TIMING,
        },
    }


def node(n: t.Node) -> dict[str, Any]:
    health = ["CMD", "minibroker", "health", f"127.0.0.1:{n.internal_port}"]
    if n.health_service:
        health += ["--service", n.health_service]
    service: dict[str, Any] = {
        "image": IMAGE,
        "build": build("runtime"),
        "command": command_lines(t.container_command(n)),
        "environment": t.container_environment(),
        "ports": published(*t.published_ports(n)),
    }
    if n.role == "broker":
        service["volumes"] = [f"{n.name}-data:{t.CONTAINER_DATA_DIR}"]
    service |= {
        "labels": n.labels,
        "healthcheck": {"test": health, **HEALTH_TIMING},
        "depends_on": healthy(t.ZOOKEEPER),
        # A broker's controlled shutdown may retry 3 times 5 s apart (Kafka's defaults).
        "stop_grace_period": "30s",
    }
    return service


def loadgen(nodes: Sequence[t.Node]) -> dict[str, Any]:
    return {
        "image": LOADGEN_IMAGE,
        "build": build("loadgen"),
        "profiles": ["loadgen"],
        # Spark's executors (spark profile) connect back to the driver by this name.
        "hostname": "loadgen",
        "entrypoint": ["python", "-m", "loadgen"],
        "command": ["--records", "100000"],
        "environment": {
            "MINIBROKER_ZK": f"{t.ZOOKEEPER}:{t.ZOOKEEPER_PORT}",
            "MINIBROKER_BOOTSTRAP": t.bootstrap_internal(),
            "MINIBROKER_LISTENER": t.INTERNAL,
            "SPARK_LOCAL_IP": "loadgen",
        },
        # Runs land in deploy/loadgen-runs on the host; root in the container so that it can
        # write there whoever owns it (the run is then given to the folder's owner).
        "user": "0:0",
        "volumes": [f"{HOST_RUNS}:{RUNS_DIR}"],
        "labels": {t.ROLE_LABEL: "loadgen"},
        "depends_on": healthy(*(n.name for n in nodes)),
    }


def spark_master() -> dict[str, Any]:
    port = SPARK_UI_PORTS["spark-master"]
    probe = f"import socket; socket.create_connection(('spark-master', {SPARK_MASTER_PORT}), 2)"
    return {
        "image": LOADGEN_IMAGE,
        "build": build("loadgen"),
        "profiles": ["spark"],
        "entrypoint": ["spark-class", "org.apache.spark.deploy.master.Master"],
        "command": ["--host", "spark-master", "--port", str(SPARK_MASTER_PORT)]
        + ["--webui-port", str(port)],
        "ports": published(port),
        "labels": {t.ROLE_LABEL: "spark"},
        "healthcheck": {"test": ["CMD", "python", "-c", probe], **HEALTH_TIMING},
        "init": True,
    }


def spark_worker() -> dict[str, Any]:
    port = SPARK_UI_PORTS["spark-worker"]
    return {
        "image": LOADGEN_IMAGE,
        "build": build("loadgen"),
        "profiles": ["spark"],
        "entrypoint": ["spark-class", "org.apache.spark.deploy.worker.Worker"],
        "command": [f"spark://spark-master:{SPARK_MASTER_PORT}", "--host", "spark-worker"]
        + ["--cores", "2", "--memory", "2g", "--webui-port", str(port)]
        + ["--work-dir", f"{HOME}/spark-work"],
        "ports": published(port),
        # Executors write the load generator's ledger; the driver reads it at the same path.
        "user": "0:0",
        "volumes": [f"{HOST_RUNS}:{RUNS_DIR}"],
        "labels": {t.ROLE_LABEL: "spark"},
        "depends_on": healthy("spark-master"),
        "init": True,
    }


# What the watch-only dashboard container says in place of fault buttons.
FAULTS_HINT = (
    "fault buttons: on the host, run `minibroker dashboard --compose --port 8091` and open "
    "http://127.0.0.1:8091/ (this container has no Docker socket), or use "
    "`minibroker cluster kill|stop|pause|isolate NODE --compose`"
)


def dashboard() -> dict[str, Any]:
    # Listens on every address inside its container, published on the host's 127.0.0.1 only.
    # Without the Docker socket it watches: the host's `minibroker dashboard --compose` acts.
    url = f"http://127.0.0.1:{t.DASHBOARD_PORT}/api/session"
    probe = f"import urllib.request; urllib.request.urlopen('{url}', timeout=2)"
    return {
        "image": IMAGE,
        "build": build("runtime"),
        "command": [
            "minibroker",
            "dashboard",
            "--zk",
            f"{t.ZOOKEEPER}:{t.ZOOKEEPER_PORT}",
            "--host",
            "0.0.0.0",
            "--port",
            str(t.DASHBOARD_PORT),
            "--faults-hint",
            FAULTS_HINT,
        ],  # fmt: skip
        "environment": {"MINIBROKER_LISTENER": t.INTERNAL},
        "ports": published(t.DASHBOARD_PORT),
        "labels": {t.ROLE_LABEL: "dashboard"},
        "healthcheck": {"test": ["CMD", "python", "-c", probe], **HEALTH_TIMING},
        "depends_on": healthy(t.ZOOKEEPER),
    }


def netfault() -> dict[str, Any]:
    # Listed so that `compose --profile tools build` builds it; the chaos commands run it.
    return {
        "image": NETFAULT_IMAGE,
        "build": build("netfault"),
        "profiles": ["tools"],
        "network_mode": "none",
        "labels": {t.ROLE_LABEL: "tool"},
    }


def compose() -> dict[str, Any]:
    nodes = t.nodes()
    services: dict[str, Any] = {t.ZOOKEEPER: zookeeper()}
    services |= {n.name: node(n) for n in nodes}
    services["dashboard"] = dashboard()
    services |= {"loadgen": loadgen(nodes), "spark-master": spark_master()}
    services["spark-worker"] = spark_worker()
    services["netfault"] = netfault()
    volumes = ["zookeeper-data", "zookeeper-datalog"]
    volumes += [f"{n.name}-data" for n in nodes if n.role == "broker"]
    # No top-level `name:` (docker-compose 1.29 rejects it): deploy/.env names the project.
    return {"services": services, "volumes": {v: {} for v in volumes}}


def header() -> list[str]:
    nodes = t.nodes()
    rows = [f"#   {t.ZOOKEEPER:<14} {t.ZOOKEEPER_PORT:<6} (ZooKeeper client port)"]
    for n in nodes:
        rows.append(
            f"#   {n.name:<14} {n.external_port:<6} gRPC (EXTERNAL listener; id {n.node_id}), "
            f"{n.metrics_port} Prometheus /metrics"
            + (f", {n.kafka_external_port} Kafka protocol" if n.kafka_external_port else "")
        )
    rows.append(f"#   {'dashboard':<14} {t.DASHBOARD_PORT:<6} the live web dashboard (http://)")
    rows += [f"#   {name:<14} {p:<6} Spark web UI" for name, p in SPARK_UI_PORTS.items()]
    return [
        "# GENERATED by scripts/gen_compose.py from minibroker/topology.py, the cluster",
        "# description the process-mode cluster uses too. Do not edit: change those and run",
        "# `python scripts/gen_compose.py` (a test fails while this file is stale).",
        "#",
        "#   docker compose -f deploy/docker-compose.yml up -d   # walkthrough: deploy/README.md",
        "#   MINIBROKER_PROFILE=kafka docker compose -f ... up -d   # Kafka's timings, not demo's",
        "#   MINIBROKER_SETTINGS='log.retention.check.interval.ms=1000' docker compose ... up -d",
        "#                       # any broker setting by Kafka's name (space- or comma-separated)",
        "#",
        "# Published on the host's 127.0.0.1 only (each host port equals the container port):",
        *rows,
        f"# Host tools: --zk 127.0.0.1:{t.ZOOKEEPER_PORT} or --bootstrap {t.bootstrap_external()}",
        f"# Kafka clients: bootstrap.servers={t.bootstrap_kafka_external()}",
        "",
    ]


SECURITY_VOLUME = f"security:{sc.CONTAINER_DIR}"
HOST_SECURE_DIR = f"${{{sc.HOST_DIR_ENV}:-./{sc.HOST_DIR_DEFAULT}}}"  # deploy/secure by default


def secured() -> dict[str, Any]:
    """What every secured service adds: the security files, after the one-shot service."""
    return {
        "volumes": [f"{SECURITY_VOLUME}:ro"],
        "depends_on": {"security": {"condition": "service_completed_successfully"}},
    }


def secure_override() -> dict[str, Any]:
    """deploy/docker-compose.secure.yml: laid over docker-compose.yml (`-f` both, or
    COMPOSE_FILE), it secures every listener, ZooKeeper and the dashboard
    (minibroker/localcluster/secure_compose.py says how)."""
    services: dict[str, Any] = {
        "security": {
            "image": IMAGE,
            # root: it chowns the volume to the nodes' user and the host copy to its owner.
            "user": "0:0",
            "command": ["python", "-m", "minibroker.localcluster.secure_compose"]
            + ["--host-mount", "/host", "--host-dir", f"${{{sc.HOST_DIR_ENV}:-secure}}"],
            "volumes": [SECURITY_VOLUME, f"{HOST_SECURE_DIR}:/host"],
            "labels": {t.ROLE_LABEL: "setup"},
            "healthcheck": {"disable": True},  # the image's check is for a running node
            "depends_on": healthy(t.ZOOKEEPER),
        }
    }
    for n in t.nodes():
        argv = ["python", "-m", n.program]
        argv += t.node_args(n, t.CONTAINER_LOG_DIR, sc.node_settings(n))
        services[n.name] = {
            # `$$`: a literal `$` to compose (the principal mapping rule's `$1`)
            "command": command_lines([a.replace("$", "$$") for a in argv]),
            "environment": sc.tools_environment(n.name),
            **secured(),
        }
    ca = f"{sc.CONTAINER_SECURITY}/ca.pem"
    probe = (
        "import socket, ssl; ssl.create_default_context(cafile='" + ca + "').wrap_socket("
        f"socket.create_connection(('127.0.0.1', {t.DASHBOARD_PORT}), 2), "
        "server_hostname='127.0.0.1').close()"
    )
    services["dashboard"] = {
        "command": [*dashboard()["command"], "--dir", sc.CONTAINER_DIR],
        "healthcheck": {"test": ["CMD", "python", "-c", probe]},
        **secured(),
    }
    return {"services": services, "volumes": {"security": {}}}


def secure_header() -> list[str]:
    return [
        "# GENERATED by scripts/gen_compose.py (secure_override). Do not edit.",
        "#",
        "# The secure profile, laid over docker-compose.yml (walkthrough: deploy/README.md):",
        "#   docker compose -f docker-compose.yml -f docker-compose.secure.yml up -d",
        "#   (or COMPOSE_FILE=docker-compose.yml:docker-compose.secure.yml; or",
        "#   `minibroker cluster up --compose --secure`)",
        "# gRPC listeners on TLS with client certificates (mutual TLS between nodes), Kafka's",
        "# listeners on SASL_SSL (SCRAM-SHA-256/512, PLAIN), ZooKeeper logins with",
        "# zookeeper.set.acl, the ACL authorizer with the super user admin, the dashboard on",
        "# HTTPS with a login. The one-shot `security` service makes the CA, certificates,",
        "# ZooKeeper login and admin password, and copies them with the admin's client",
        f"# properties to {HOST_SECURE_DIR} (relative to this file) for the host's tools:",
        f"#   minibroker topics list --zk 127.0.0.1:{t.ZOOKEEPER_PORT} --dir secure",
        "#   Kafka clients: secure/admin.properties (SASL_SSL, SCRAM-SHA-512)",
        "",
    ]


COMMENTS: Mapping[tuple[str, ...], str] = {
    ("services", "zookeeper"): "Debian's ZooKeeper 3.8 (deploy/Dockerfile, target zookeeper);\n"
    "data and transaction log in named volumes.",
    ("services", "broker-1"): "Brokers: id N, INTERNAL 9091 for the other nodes and containers,\n"
    "EXTERNAL (published) for the host; Kafka's protocol on KAFKA_INTERNAL 29092 and\n"
    "KAFKA_EXTERNAL (published, 9091 + N). Logs live in one named volume each.",
    ("services", "controller-1"): "Controllers: id 100+N; the first to win /controller is "
    "active,\nthe other a standby (both healthy; minibroker.v1.Control is SERVING on the active).",
    ("services", "loadgen"): "docker compose --profile loadgen run --rm loadgen [FLAGS]; add\n"
    "--master spark://spark-master:7077 with the spark profile up (deploy/README.md).",
    ("services", "dashboard"): f"The live dashboard: http://127.0.0.1:{t.DASHBOARD_PORT}/ "
    "(minibroker dashboard;\nits fault buttons need the host's "
    "`minibroker dashboard --compose --port 8091`).",
    ("services", "netfault"): "iptables for the network faults of `minibroker cluster isolate/cut\n"
    "--compose`: a helper the chaos commands run in a node's network namespace, not a service.",
    ("services", "spark-master"): "Spark standalone, from the load generator's image: the same\n"
    "Spark as pyspark and the Python packages its executors need.",
    (
        "volumes",
    ): "Named volumes: `docker compose down -v` forgets the cluster (ZooKeeper and logs\n"
    "together: broker logs must never outlive the ZooKeeper they were registered with).",
}


SECURE_COMMENTS: Mapping[tuple[str, ...], str] = {
    (
        "services",
        "security",
    ): "One-shot, before every node: CA, certificates, ZooKeeper login, the\n"
    "admin's SCRAM credentials; exits 0 (minibroker/localcluster/secure_compose.py).",
    ("services", "broker-1"): "Every node: the same listeners, secured (its own certificate).",
    ("volumes",): "The security files live as long as the cluster: `down -v` forgets them too.",
}


def render() -> dict[Path, str]:
    return {
        OUT: "\n".join([*header(), *emit(compose(), COMMENTS)]) + "\n",
        SECURE_OUT: "\n".join([*secure_header(), *emit(secure_override(), SECURE_COMMENTS)]) + "\n",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check freshness")
    args = parser.parse_args()
    stale = 0
    for out, text in render().items():
        name = out.relative_to(ROOT)
        if not args.check:
            out.write_text(text)
            print(f"wrote {name}")
        elif not out.exists() or out.read_text() != text:
            print(f"{name} is stale; run: python scripts/gen_compose.py")
            stale = 1
        else:
            print(f"{name} is fresh")
    return stale


if __name__ == "__main__":
    sys.exit(main())
