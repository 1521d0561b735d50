"""Run a real Apache ZooKeeper server (Debian's `zookeeper` package) for local clusters and tests.

Finds the jars, writes a zoo.cfg into the server's own data dir, launches the JVM and waits
until it answers the `srvr` four-letter command (docs/notes.md has the measured facts).
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

INSTALL_HINT = (
    "ZooKeeper is not installed. Install Debian's package: `apt-get install zookeeper` "
    "(as root), or run `bash scripts/bootstrap.sh`, which does it for you. Elsewhere, set "
    "MINIBROKER_ZOOKEEPER_CLASSPATH to a ZooKeeper 3.5+ class path (zookeeper.jar and its "
    "dependencies)."
)

_DEBIAN_JARS = (
    "/usr/share/java/zookeeper.jar",
    "/usr/share/java/slf4j-log4j12.jar",
    "/usr/share/java/log4j-1.2.jar",
)
_DEBIAN_CONF = "/etc/zookeeper/conf"


class ZooKeeperNotFound(RuntimeError):
    pass


@dataclass(frozen=True)
class ZooKeeperInstall:
    java: str
    classpath: str


def find_zookeeper() -> ZooKeeperInstall:
    """Where ZooKeeper and java are, or ZooKeeperNotFound with what to install."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperNotFound("java is not on PATH. " + INSTALL_HINT)
    override = os.environ.get("MINIBROKER_ZOOKEEPER_CLASSPATH")
    if override:
        return ZooKeeperInstall(java, override)
    if not Path(_DEBIAN_JARS[0]).exists():
        raise ZooKeeperNotFound(INSTALL_HINT)
    parts = [j for j in _DEBIAN_JARS if Path(j).exists()]
    if Path(_DEBIAN_CONF).is_dir():
        parts.append(_DEBIAN_CONF)
    return ZooKeeperInstall(java, ":".join(parts))


def write_config(data_dir: Path, port: int, host: str = "127.0.0.1") -> Path:
    """A standalone zoo.cfg: loopback only, fast ticks so short sessions expire on time."""
    data_dir.mkdir(parents=True, exist_ok=True)
    cfg = data_dir / "zoo.cfg"
    cfg.write_text(
        "\n".join(
            [
                "tickTime=500",
                f"dataDir={data_dir.resolve() / 'data'}",
                f"clientPort={port}",
                f"clientPortAddress={host}",
                "admin.enableServer=false",
                "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons,dump,conf",
                # Sessions between 1 s and 60 s; the default max (20 ticks = 10 s) would clamp
                # Kafka's 18 s default session timeout.
                "minSessionTimeout=1000",
                "maxSessionTimeout=60000",
                "maxClientCnxns=0",
                "",
            ]
        )
    )
    return cfg


def command(install: ZooKeeperInstall, cfg: Path, log_dir: Path) -> list[str]:
    return [
        install.java,
        "-Xmx256m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-Dzookeeper.root.logger=INFO,CONSOLE",
        f"-Dzookeeper.log.dir={log_dir.resolve()}",
        "-cp",
        install.classpath,
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        str(cfg.resolve()),
    ]


def four_letter(host: str, port: int, word: str = "srvr", timeout_s: float = 1.0) -> str | None:
    """Send a four-letter command; the answer, or None if nothing answers."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as sock:
            sock.sendall(word.encode("ascii"))
            chunks = []
            while True:
                chunk = sock.recv(4096)
                if not chunk:
                    break
                chunks.append(chunk)
            return b"".join(chunks).decode("utf-8", errors="replace")
    except OSError:
        return None
