"""Starting a compose cluster with the checks `docker-compose up` does not make: a Docker engine
to talk to, the images built (a machine without a registry cannot pull or build them from
official bases), and the published ports free. Each failure is one ChaosError naming the fix.
Then `up -d` and a wait until every service is healthy (docker-compose 1.29 has no `--wait`).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from minibroker import topology as t
from minibroker.chaos.backend import ChaosError
from minibroker.chaos.compose import COMPLETED, PROJECT_LABEL, ComposeBackend, connect_docker
from minibroker.localcluster import secure_compose
from minibroker.runtime.settings import ConfigError, Settings

COMPOSE_FILE = Path("deploy") / "docker-compose.yml"
SECURE_FILE = "docker-compose.secure.yml"  # the secure profile, laid over the compose file
# The images `up` needs (the load generator's only with its profile).
NEEDED_IMAGES = (t.RUNTIME_IMAGE, t.ZOOKEEPER_IMAGE)


def compose_command() -> list[str]:
    """`docker compose` (v2) where it exists, else Debian's `docker-compose` 1.29: the compose
    file works with both. MINIBROKER_COMPOSE=v1 picks 1.29 even where v2 exists."""
    if shutil.which("docker") and os.environ.get("MINIBROKER_COMPOSE") != "v1":
        v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
        if v2.returncode == 0:
            return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    raise ChaosError(
        "neither `docker compose` nor `docker-compose` is installed: install Docker's compose "
        "plugin, or Debian's docker-compose (apt-get install docker-compose)"
    )


def find_compose_file(start: Path | None = None) -> Path:
    """deploy/docker-compose.yml in the current directory or one above it."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / COMPOSE_FILE).is_file():
            return folder / COMPOSE_FILE
        if folder.name == "deploy" and (folder / "docker-compose.yml").is_file():
            return folder / "docker-compose.yml"
    raise ChaosError(
        f"no {COMPOSE_FILE} here or above: run this in a minibroker checkout, or give --file"
    )


def missing_images(client: Any) -> list[str]:
    from docker.errors import ImageNotFound

    missing = []
    for image in NEEDED_IMAGES:
        try:
            client.images.get(image)
        except ImageNotFound:
            missing.append(image)
    return missing


def busy_ports(client: Any, project: str) -> list[str]:
    """Published ports something else holds on 127.0.0.1, each with who holds it if a container
    does ("19001 (container minibroker_broker-1_1 of project minibroker)")."""
    ports = [t.ZOOKEEPER_PORT, *(p for n in t.nodes() for p in t.published_ports(n))]
    ports.append(t.DASHBOARD_PORT)
    busy = []
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                s.bind(("127.0.0.1", port))
                continue
            except OSError:
                pass
        holders = client.containers.list(filters={"publish": str(port)})
        who = ", ".join(
            f"container {c.name} of project {c.labels.get(PROJECT_LABEL, '?')}" for c in holders
        )
        busy.append(f"{port} ({who or 'not a container: `ss -ltnp` names the process'})")
    return busy


def preflight(project: str, client: Any | None = None) -> Any:
    """The Docker SDK client once the engine answers, the images exist and the ports are free
    (ports held by this very project's containers are fine: `up` keeps them)."""
    client = client if client is not None else connect_docker()
    missing = missing_images(client)
    if missing:
        raise ChaosError(
            f"the images {', '.join(missing)} are not built: run `bash deploy/build-images.sh` "
            "(no registry needed), or `docker compose -f deploy/docker-compose.yml build` where "
            "official images can be pulled"
        )
    busy = [b for b in busy_ports(client, project) if f"of project {project})" not in b]
    if busy:
        raise ChaosError(
            f"ports in use on 127.0.0.1: {'; '.join(busy)}. Stop what holds them (another "
            "compose cluster: `docker-compose -p PROJECT down`) and try again"
        )
    return client


def environment(profile: str | None, overrides: Sequence[str]) -> dict[str, str]:
    """The variables the compose file hands every broker and controller for a profile and
    `name=value` settings (MINIBROKER_PROFILE, MINIBROKER_SETTINGS; those not given are left to
    the environment); ChaosError for settings it cannot carry, or that a node would refuse,
    before any container starts."""
    for pair in overrides:
        name, _, value = pair.partition("=")
        if name.strip() in t.DEPLOYMENT_SETTINGS:
            raise ChaosError(
                f"{name}: the compose file sets where nodes listen and store data; a compose "
                "cluster cannot change it"
            )
        if not value or any(c in value for c in " ,\t\n"):
            raise ChaosError(
                f"{pair!r}: a compose cluster takes settings through $MINIBROKER_SETTINGS, "
                "which cannot hold an empty value or one with a space or comma"
            )
    try:
        Settings.load(profile=profile, overrides=overrides, environ={})
    except ConfigError as exc:
        raise ChaosError(str(exc)) from None
    env = {"MINIBROKER_PROFILE": profile} if profile else {}
    return env | ({"MINIBROKER_SETTINGS": " ".join(overrides)} if overrides else {})


def compose_files(compose_file: Path, secure: bool) -> list[str]:
    """`-f` arguments: the compose file, and with `secure` its secure profile beside it."""
    files = ["-f", str(compose_file)]
    if secure:
        files += ["-f", str(compose_file.with_name(SECURE_FILE))]
    return files


def secure_dir(compose_file: Path, env: Mapping[str, str] | None = None) -> Path:
    """Where the secure profile copies the host's security files: $MINIBROKER_SECURE_DIR (of
    `env`, by default this process's environment), else `secure` beside the compose file."""
    named = (os.environ if env is None else env).get(secure_compose.HOST_DIR_ENV)
    return Path(named) if named else compose_file.parent / secure_compose.HOST_DIR_DEFAULT


def up(
    project: str,
    compose_file: Path,
    timeout_s: float,
    secure: bool = False,
    env: Mapping[str, str] | None = None,
) -> str:
    """Checks, `up -d`, and the wait; the lines to print. `env`: variables the compose file
    reads (MINIBROKER_PROFILE, MINIBROKER_SETTINGS, ...) over this process's environment."""
    client = preflight(project)
    command = [*compose_command(), *compose_files(compose_file, secure), "-p", project, "up", "-d"]
    env = {**os.environ, **(env or {})}
    if secure:
        # An absolute folder, made by us (not by the engine, as root): the admin's client
        # properties then name files any working directory reaches.
        host_dir = secure_dir(compose_file, env).resolve()
        host_dir.mkdir(parents=True, exist_ok=True)
        env[secure_compose.HOST_DIR_ENV] = str(host_dir)
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:]
        raise ChaosError(f"`{' '.join(command)}` failed: {' '.join(last)}")
    line = wait_healthy(ComposeBackend(project, "", client=client), timeout_s, started)
    if secure:
        line += (
            f"\nsecure: the admin's Kafka client settings in {host_dir}/admin.properties; "
            f"minibroker's tools: --dir {host_dir}"
        )
    return line


def wait_healthy(backend: ComposeBackend, timeout_s: float, started: float | None = None) -> str:
    """Wait until every service of the project is healthy (or running, without a check); the
    line to print, or ChaosError naming the services that are not, at once for one that exited."""
    started = time.monotonic() if started is None else started
    deadline = time.monotonic() + timeout_s
    where = f"compose project {backend.project!r}"
    while True:
        health = backend.health()
        waiting = {s: h for s, h in health.items() if h not in ("healthy", "running", COMPLETED)}
        if health and not waiting:
            took = time.monotonic() - started
            states = ", ".join(f"{s} {h}" for s, h in health.items())
            return f"{where}: {len(health)} services up in {took:.1f} s: {states}"
        # Unhealthy is not final: Docker keeps checking, and a container just resumed reads
        # unhealthy (the engine marks a paused one so) until its next check passes.
        broken = {s: h for s, h in waiting.items() if h not in ("starting", "created", "unhealthy")}
        if broken or time.monotonic() >= deadline:
            if not health:
                raise ChaosError(
                    f"{where} has no container: start it with `docker-compose up -d` "
                    "(or `minibroker cluster up --compose`)"
                )
            states = ", ".join(f"{s} {h}" for s, h in (broken or waiting).items())
            after = "" if broken else f" after {timeout_s:.0f} s"
            raise ChaosError(
                f"{where} is not healthy{after}: {states} (`docker-compose logs SERVICE` says why)"
            )
        time.sleep(0.5)


def status(project: str, client: Any | None = None) -> list[dict[str, Any]]:
    """Every container of the project: its service, state (Docker's health where it has a
    check), and the ports it publishes on the host ("127.0.0.1:9092 -> 29093/tcp")."""
    client = client if client is not None else connect_docker()
    backend = ComposeBackend(project, "", client=client)
    health = backend.health()
    found = client.containers.list(all=True, filters={"label": [f"{PROJECT_LABEL}={project}"]})
    rows = []
    for c in sorted(found, key=lambda c: c.name):
        service = (c.labels or {}).get("com.docker.compose.service", c.name)
        ports = []
        for inside, bindings in sorted(((c.attrs.get("NetworkSettings") or {}).get("Ports") or {})
                                       .items()):  # fmt: skip
            for b in bindings or []:
                ports.append(f"{b.get('HostIp') or '0.0.0.0'}:{b.get('HostPort')} -> {inside}")
        rows.append(
            {"container": c.name, "service": service, "state": health.get(service, c.status),
             "ports": ports}
        )  # fmt: skip
    return rows


def render_status(project: str, rows: list[dict[str, Any]]) -> str:
    if not rows:
        return (
            f"compose project {project!r} has no container: start it with "
            "`minibroker cluster up --compose`"
        )
    lines = [f"compose project {project}", f"{'SERVICE':<16}{'STATE':<11}PUBLISHED"]
    for r in rows:
        lines.append(f"{r['service']:<16}{r['state']:<11}{', '.join(r['ports']) or '-'}")
    kafka_ports = {f"{n.kafka_external_port}/tcp" for n in t.nodes() if n.role == "broker"}
    kafka = [
        p.split(" -> ")[0].replace("0.0.0.0", "127.0.0.1")
        for r in rows
        for p in r["ports"]
        if p.split(" -> ")[-1] in kafka_ports
    ]
    if kafka:
        lines.append(f"Kafka clients (bootstrap.servers): {','.join(kafka)}")
    return "\n".join(lines)


def down(project: str, compose_file: Path) -> str:
    """`down -v --remove-orphans` with every profile, so nothing of the project is left."""
    profiles = [a for p in ("loadgen", "spark", "tools") for a in ("--profile", p)]
    # With the secure profile's file too, so that its volume goes (harmless on a plain cluster).
    secure = compose_file.with_name(SECURE_FILE).is_file()
    command = [
        *compose_command(), *compose_files(compose_file, secure), "-p", project, *profiles,
        "down", "-v", "--remove-orphans", "-t", "10",
    ]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        last = (result.stderr.strip() or result.stdout.strip()).splitlines()[-1:]
        raise ChaosError(f"`{' '.join(command)}` failed: {' '.join(last)}")
    return f"compose project {project!r} is down: its containers, network and volumes removed"
