"""Write deploy/docker-compose.yml from minibroker/topology.py (the one cluster description the
process-mode cluster uses too), or check that the committed file is what it would write.

    python scripts/gen_compose.py          # rewrite deploy/docker-compose.yml
    python scripts/gen_compose.py --check  # exit 1 when the committed file is stale
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from minibroker import topology as t

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "deploy" / "docker-compose.yml"
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


class Folded(list[str]):
    """A command written as a folded YAML string, one flag per line; compose splits it like a
    shell would (our arguments hold no spaces or quotes, so the split is exact)."""


def command_lines(argv: Sequence[str]) -> Folded:
    """`python -m program --name N --id I ...` on the first line, then one `--set` a line."""
    lines: list[list[str]] = [[]]
    for arg in argv:
        if arg == "--set":
            lines.append([])
        lines[-1].append(arg)
    assert all(" " not in a and "'" not in a and '"' not in a for a in argv), argv
    return Folded(" ".join(line) for line in lines)


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

_PLAIN = re.compile(r"[A-Za-z/$_.-][\w./$:{}=@+,-]*|\d+[a-z]+")  # `3s`, `2g`: not numbers
_YAML_WORDS = {"true", "false", "yes", "no", "on", "off", "null", "y", "n", "~"}


def scalar(value: Any, flow: bool = False) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    text = str(value)
    plain = (
        _PLAIN.fullmatch(text) is not None
        and text.lower() not in _YAML_WORDS
        and ": " not in text
        and not text.startswith("- ")
        and not (flow and any(c in text for c in ",[]{}"))
    )
    return text if plain else json.dumps(text)


def emit(obj: Mapping[str, Any], path: tuple[str, ...] = (), indent: int = 0) -> list[str]:
    """YAML for the compose mapping: block style, short scalar lists inline, comments above."""
    pad = " " * indent
    lines: list[str] = []
    for i, key in enumerate(obj):
        value = obj[key]
        if (indent == 0 and i > 0) or path == ("services",):
            lines.append("")  # a blank line between top-level keys and between services
        comment = COMMENTS.get((*path, key))
        if comment:
            lines += [f"{pad}# {c}" for c in comment.splitlines()]
        if isinstance(value, Mapping) and value:
            lines.append(f"{pad}{key}:")
            lines += emit(value, (*path, key), indent + 2)
        elif isinstance(value, Mapping):
            lines.append(f"{pad}{key}: {{}}")
        elif isinstance(value, Folded):
            lines.append(f"{pad}{key}: >-")
            lines += [f"{pad}  {line}" for line in value]
        elif isinstance(value, list):
            flow = f"{pad}{key}: [{', '.join(scalar(v, flow=True) for v in value)}]"
            if len(flow) <= 100 and len(value) <= 8:
                lines.append(flow)
            else:
                lines.append(f"{pad}{key}:")
                lines += [f"{pad}  - {scalar(v)}" for v in value]
        else:
            lines.append(f"{pad}{key}: {scalar(value)}")
    return lines


def render() -> str:
    return "\n".join([*header(), *emit(compose())]) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check freshness")
    args = parser.parse_args()
    text = render()
    if args.check:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale; run: python scripts/gen_compose.py")
            return 1
        print(f"{OUT.relative_to(ROOT)} is fresh")
        return 0
    OUT.parent.mkdir(exist_ok=True)
    OUT.write_text(text)
    print(f"wrote {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
