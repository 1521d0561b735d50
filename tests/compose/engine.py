"""The compose cluster on the real Docker engine, for tests/compose: the very
deploy/docker-compose.yml users run, under a project name of the tests' own (so that `down -v`
can only remove what the tests created), with images from deploy/build-images.sh.
"""

from __future__ import annotations

import functools
import io
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from minibroker import topology as t
from minibroker.chaos import ChaosError, compose_up
from minibroker.core.records import iter_batches
from minibroker.runtime.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "deploy" / "docker-compose.yml"
SECURE_FILE = ROOT / "deploy" / compose_up.SECURE_FILE  # the secure profile, laid over it
SECURE_DIR = ROOT / "deploy" / "secure"  # where it copies the host's security files
PROJECT = "mbtest"
ZK = f"127.0.0.1:{t.ZOOKEEPER_PORT}"
BOOTSTRAP = [f"127.0.0.1:{n.external_port}" for n in t.nodes() if n.role == "broker"]
PROJECT_LABEL = "com.docker.compose.project"


def engine_or_skip() -> Any:
    """A Docker SDK client; without an engine the compose tests skip, unless CI=true (then a
    missing engine is a failure: CI must prove the compose cluster)."""
    reason = ""
    try:
        import docker

        client = docker.from_env()
        client.ping()
    except Exception as exc:
        reason = f"no Docker engine ({' '.join(str(exc).split())[:200]})"
    if not reason and compose_command() is None:
        reason = "neither `docker compose` nor `docker-compose` is installed"
    if reason:
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    return client


def compose_command() -> list[str] | None:
    try:
        return compose_up.compose_command()
    except ChaosError:
        return None


def compose(
    *args: str, check: bool = True, timeout: float = 300, secure: bool = False
) -> subprocess.CompletedProcess[str]:
    """`docker compose ARGS` on the tests' project; `secure`: with the secure profile's file."""
    command = compose_command()
    assert command is not None
    files = compose_up.compose_files(COMPOSE_FILE, secure)
    return subprocess.run(
        [*command, *files, "-p", PROJECT, *args],
        capture_output=True,
        text=True,
        check=check,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


README = ROOT / "deploy" / "README.md"
_BLOCK = re.compile(r"<!-- walkthrough: ([\w-]+) -->\n```sh\n(.*?)\n```", re.DOTALL)


def walkthrough(doc: Path = README) -> dict[str, str]:
    """The walkthrough blocks of `doc` (deploy/README.md, deploy/SWARM.md) by name, in the
    document's order."""
    blocks: dict[str, str] = {}
    for name, body in _BLOCK.findall(doc.read_text()):
        assert name not in blocks, f"two walkthrough blocks named {name}"
        blocks[name] = body
    return blocks


def block_env(shims: Path) -> dict[str, str]:
    """The environment a reader's shell would have, aimed at the tests' project: the venv's
    `minibroker` on PATH, COMPOSE_PROJECT_NAME (compose and minibroker both obey it), and a
    `docker` that turns `docker compose` into `docker-compose` where only 1.29 exists."""
    env = cli_env()
    env["COMPOSE_PROJECT_NAME"] = PROJECT
    command = compose_command()
    if command == ["docker-compose"]:
        real = shutil.which("docker")
        shims.mkdir(parents=True, exist_ok=True)
        shim = shims / "docker"
        shim.write_text(
            "#!/bin/sh\n"
            "# `docker compose ARGS` as docker-compose 1.29 (no compose v2 on this machine)\n"
            'if [ "$1" = compose ]; then shift; exec docker-compose "$@"; fi\n'
            f'exec {real} "$@"\n'
        )
        shim.chmod(0o755)
        env["PATH"] = f"{shims}{os.pathsep}{env['PATH']}"
    return env


def run_block(
    name: str, env: dict[str, str], *, timeout: float = 600, doc: Path = README
) -> subprocess.CompletedProcess[str]:
    """Run the walkthrough block `name` of `doc` as written, in deploy/, with bash -e; it must
    succeed."""
    body = walkthrough(doc)[name]
    result = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", body],
        cwd=ROOT / "deploy", env=env, capture_output=True, text=True, check=False,
        stdin=subprocess.DEVNULL, timeout=timeout,
    )  # fmt: skip
    assert result.returncode == 0, (
        f"walkthrough block {name}:\n{body}\n{result.stdout[-3000:]}{result.stderr[-3000:]}"
    )
    return result


def start_block(name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """The walkthrough block `name` in the background (a run the test acts on meanwhile)."""
    return subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", walkthrough()[name]],
        cwd=ROOT / "deploy", env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL, text=True,
    )  # fmt: skip


def leftovers(client: Any, project: str = PROJECT, label: str = PROJECT_LABEL) -> list[str]:
    """Containers, networks and volumes of the tests' project (those whose `label` is
    `project`) still on the engine (a sparse listing: a container removed meanwhile is not
    inspected)."""
    where = {"label": f"{label}={project}"}
    found = [
        f"container {(c.attrs.get('Names') or [c.id])[0].lstrip('/')}"
        for c in client.containers.list(all=True, filters=where, sparse=True)
    ]
    found += [f"network {n.name}" for n in client.networks.list(filters=where)]
    found += [f"volume {v.name}" for v in client.volumes.list(filters=where)]
    return found


@contextmanager
def cluster_up(client: Any, env: dict[str, str], secure: bool = False) -> Iterator[float]:
    """The walkthrough's `build` and `up` (`secure-up`: the secure profile), yielding the
    seconds from `up` to every service healthy; its `down` (`secure-down`) after, also when a
    test fails, and nothing of the project may be left behind (nor deploy/secure)."""
    up, down = ("secure-up", "secure-down") if secure else ("up", "down")
    run_block("build", env, timeout=3600)
    compose("--profile", "loadgen", "--profile", "spark", "down", "-v", "--remove-orphans",
            check=False, secure=True)  # fmt: skip
    started = time.monotonic()
    try:
        print(run_block(up, env, timeout=300).stdout.strip())
        yield time.monotonic() - started
    finally:
        try:
            run_block(down, env, timeout=300)
        finally:
            # Whatever the block left (a failed step may have left anything).
            compose("--profile", "loadgen", "--profile", "spark", "--profile", "tools", "down",
                    "-v", "--remove-orphans", "-t", "5", check=False, secure=True)  # fmt: skip
            if secure:
                shutil.rmtree(SECURE_DIR, ignore_errors=True)
        left = leftovers(client)
        assert left == [], f"left behind by the walkthrough's `down`: {left}"


def restore(client: Any, env: dict[str, str]) -> None:
    """After a test failed midway: every container running, unpaused and reconnected, and every
    service healthy again, so that the package's later tests meet the cluster `up` made rather
    than what the failed step left."""
    where = {"label": f"{PROJECT_LABEL}={PROJECT}", "status": "paused"}
    for c in client.containers.list(filters=where):
        c.unpause()
    for argv in (
        [sys.executable, "-m", "minibroker.cli.main", "cluster", "heal", "--compose"],
        [*(compose_command() or []), "-f", str(COMPOSE_FILE), "-p", PROJECT, "up", "-d"],
        [sys.executable, "-m", "minibroker.cli.main", "cluster", "wait", "--compose"],
    ):
        subprocess.run(argv, env=env, capture_output=True, check=False, timeout=300,
                       stdin=subprocess.DEVNULL)  # fmt: skip


def logs(tail: int = 40) -> str:
    return compose("logs", "--no-color", "--tail", str(tail), check=False).stdout


def container_of(client: Any, service: str) -> Any:
    (c,) = client.containers.list(
        all=True,
        filters={"label": [f"{PROJECT_LABEL}={PROJECT}", f"com.docker.compose.service={service}"]},
    )
    return c


def health(client: Any, service: str) -> str:
    """The Docker health status of `service`'s container (its state if it has no check)."""
    state = container_of(client, service).attrs["State"]
    return str(state["Health"]["Status"] if "Health" in state else state["Status"])


def committed_batches(client: Any, broker: int, topic: str, partition: int, hw: int) -> list[bytes]:
    """The batches of broker `broker`'s log of topic-partition below the HW, read from its
    container's volume (docker cp): what every replica must hold byte for byte."""
    c = container_of(client, f"broker-{broker}")
    stream, _ = c.get_archive(f"{t.CONTAINER_DATA_DIR}/logs/{topic}-{partition}")
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        segments = sorted(
            (m for m in tar.getmembers() if m.name.endswith(".log")), key=lambda m: m.name
        )
        data = b"".join(tar.extractfile(m).read() for m in segments)  # type: ignore[union-attr]
    out = []
    for h in iter_batches(data):
        if h.base_offset + h.last_offset_delta < hw:
            out.append(bytes(data[h.position : h.position + h.size]))
    return out


def mb(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`minibroker ARGS` from the host, as a reader types it."""
    result = subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", *args],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=timeout,
    )  # fmt: skip
    if check:
        assert result.returncode == 0, f"minibroker {' '.join(args)}: {result.stderr}"
    return result


@contextmanager
def leader_killer(client: Any, topic: str) -> Iterator[Callable[[], None]]:
    """A fault for a running test: `cluster kill leader --topic TOPIC --compose` (SIGKILL of
    the container of its first partition's leader). Every broker it killed is started again
    after, and waited for until healthy; it must have killed one."""
    killed: list[str] = []

    def kill() -> None:
        out = mb("cluster", "kill", "leader", "--topic", topic, "--compose", PROJECT)
        killed.append(out.stdout.split()[1])  # "kill: broker-N (...)"

    try:
        yield kill
    finally:
        # Only the killed broker is waited for: the walkthrough leaves a killed controller down.
        for name in killed:
            mb("cluster", "start", name, "--compose", PROJECT)
            wait_until(functools.partial(_is_healthy, client, name), timeout_s=90,
                       what=f"{name} healthy again")  # fmt: skip
    assert killed, "no leader was killed"


def _is_healthy(client: Any, service: str) -> bool:
    return health(client, service) == "healthy"


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
    env["PATH"] = str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", "")
    return env
