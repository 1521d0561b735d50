"""The process-mode cluster's state file (`cluster.json`): every process we started, its PID,
ports, data dir and log file; every other command reads it."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from minibroker import topology

STATE_FILE = "cluster.json"
DEFAULT_DIR = ".minibroker"
# Controller ids are their own id space, written as /controller's "brokerid" (design §1).
CONTROLLER_ID_BASE = topology.CONTROLLER_ID_BASE
HOST = "127.0.0.1"
# Seconds a clean stop may take before the process is killed (docker stop's timeout too).
STOP_GRACE_S = 30
# `up --proxy`: the fault proxy's process name (and role), and its link table in its dir.
FAULT_PROXY = "faultproxy"
LINKS_FILE = "links.json"
# `up --dashboard`: the live dashboard's process name (and role); its port is the web port.
DASHBOARD = "dashboard"
# Roles that serve the user rather than the cluster: no chaos target, no events of their own.
TOOL_ROLES = (FAULT_PROXY, DASHBOARD)


ADMIN_CONFIG = "admin.properties"  # `up --secure`: the super user's client settings


class ClusterError(RuntimeError):
    """A cluster command cannot be carried out; the message says why and what to do."""


TOKEN_LISTENER = "TOKEN"  # `up --secure`: brokers' gRPC listener for SCRAM login tokens


@dataclass
class ProcessInfo:
    name: str
    # "zookeeper" | "broker" | "controller" | "faultproxy" (port: its control port) | "dashboard"
    role: str
    id: int | None
    host: str
    port: int
    data_dir: str
    log_file: str
    cmd: list[str]
    pid: int = -1
    start_time: str = ""  # /proc/PID/stat's start time at launch: the PID is ours while it matches
    metrics_port: int = 0  # brokers' Prometheus endpoint on 127.0.0.1; 0 = none
    kafka_port: int = 0  # a broker's KAFKA listener (Kafka's wire protocol); 0 = none
    kafka_tls_port: int = 0  # `up --secure`: its KAFKA_SSL listener (client certificates)
    token_port: int = 0  # `up --secure`: its TOKEN gRPC listener (SCRAM login tokens)

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ClusterState:
    dir: str
    zk_connect: str
    profile: str
    overrides: list[str] = field(default_factory=list)
    processes: list[ProcessInfo] = field(default_factory=list)
    secure: bool = False  # `up --secure`: DIR/admin.properties holds the admin's settings
    # `up --proxy`: every link of the fault proxy (LinkSpec.to_json()); empty without one.
    proxy_links: list[dict[str, Any]] = field(default_factory=list)

    def save(self) -> None:
        path = Path(self.dir) / STATE_FILE
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=2) + "\n")
        tmp.replace(path)

    @classmethod
    def load(cls, cluster_dir: Path) -> ClusterState:
        path = cluster_dir / STATE_FILE
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            raise ClusterError(
                f"no cluster in {cluster_dir} (no {STATE_FILE}); start one with "
                f"`minibroker cluster up --dir {cluster_dir}`"
            ) from None
        procs = [ProcessInfo(**p) for p in raw.pop("processes")]
        return cls(processes=procs, **raw)

    def process(self, name: str) -> ProcessInfo:
        for p in self.processes:
            if p.name == name:
                return p
        names = ", ".join(p.name for p in self.processes)
        raise ClusterError(f"no process named {name!r} in this cluster (have: {names})")

    def by_role(self, role: str) -> list[ProcessInfo]:
        return [p for p in self.processes if p.role == role]

    @property
    def admin_client_config(self) -> str | None:
        """`up --secure`: the admin's Kafka client property file."""
        return str(Path(self.dir) / ADMIN_CONFIG) if self.secure else None

    def fault_proxy(self) -> ProcessInfo | None:
        """The fault proxy's process, if the cluster was started with one."""
        return next(iter(self.by_role(FAULT_PROXY)), None)


# ---- process liveness, by PID and command line ----------------------------------------------
