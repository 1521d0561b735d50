"""Static checks of deploy/docker-compose.yml, no Docker engine needed. Each check returns the
problems it found (empty: fine), so tests run them on the committed file and on broken copies.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Collection, Iterator, Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from minibroker import topology as t
from minibroker.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
COMPOSE = ROOT / "deploy" / "docker-compose.yml"
PROGRAMS = ("broker", "controller", "loadgen")
SOURCE_PACKAGES = ("minibroker", "broker", "controller", "loadgen")
# What the official zookeeper image's entrypoint and zkEnv.sh read.
SPARK_CLASSES = {"org.apache.spark.deploy.master.Master", "org.apache.spark.deploy.worker.Worker"}
ROLES = {"zookeeper", "broker", "controller", "dashboard", "loadgen", "spark", "tool"}

Compose = dict[str, Any]
Service = dict[str, Any]


def load(path: Path = COMPOSE) -> Compose:
    data: Compose = YAML(typ="safe").load(path.read_text())
    return data


def interpolate(value: str, env: Mapping[str, str]) -> str:
    """Compose's `${VAR:-default}`, `${VAR-default}`, `${VAR}` and `$$`."""

    def one(m: re.Match[str]) -> str:
        if m[0] == "$$":
            return "$"
        name, op, default = m["name"], m["op"], m["default"] or ""
        got = env.get(name)
        if op == ":-":
            return got or default
        if op == "-":
            return default if got is None else got
        return got or ""

    return re.sub(r"\$\$|\$\{(?P<name>\w+)(?:(?P<op>:?-)(?P<default>[^}]*))?\}", one, value)


def ours(compose: Compose) -> dict[str, Service]:
    """Services that run minibroker's images (built from deploy/Dockerfile), not ZooKeeper's."""
    return {
        name: s
        for name, s in compose["services"].items()
        if isinstance(s.get("build"), dict)
        and s["build"].get("dockerfile") == "deploy/Dockerfile"
        and s["build"].get("target") in ("runtime", "loadgen")
    }


def argv(service: Service) -> list[str]:
    """entrypoint + command, split as compose splits a string."""
    out: list[str] = []
    for key in ("entrypoint", "command"):
        value = service.get(key) or []
        out += shlex.split(value) if isinstance(value, str) else [str(v) for v in value]
    return out


def environment(service: Service, host_env: Mapping[str, str]) -> dict[str, str]:
    env = service.get("environment") or {}
    if isinstance(env, list):
        env = dict(e.split("=", 1) for e in env)
    return {k: interpolate(str(v), host_env) for k, v in env.items()}


def settings_flags(args: list[str]) -> dict[str, str]:
    """The `--set name=value` pairs of a command line."""
    return dict(args[i + 1].split("=", 1) for i, a in enumerate(args[:-1]) if a == "--set")


def flag(args: list[str], name: str) -> str | None:
    return args[args.index(name) + 1] if name in args[:-1] else None


def program(service: Service) -> str | None:
    args = argv(service)
    if args[:2] == ["python", "-m"] and len(args) > 2 and args[2] in PROGRAMS:
        return args[2]
    return None


def node_services(compose: Compose) -> Iterator[tuple[t.Node, Service | None]]:
    for n in t.nodes():
        yield n, compose["services"].get(n.name)


# ---- the checks --------------------------------------------------------------------------


def reference_problems(compose: Compose) -> list[str]:
    """depends_on, volumes, networks and profiles name things that exist and can be started."""
    problems = []
    services = compose.get("services", {})
    volumes = compose.get("volumes") or {}
    networks = set(compose.get("networks") or {}) | {"default"}
    used_volumes = set()
    for name, s in services.items():
        for dep in s.get("depends_on") or {}:
            if dep not in services:
                problems.append(f"{name}: depends_on unknown service {dep!r}")
            elif services[dep].get("profiles") and not set(s.get("profiles") or ()) & set(
                services[dep]["profiles"]
            ):
                problems.append(f"{name}: depends on {dep}, which only runs under a profile")
        for mount in s.get("volumes") or []:
            source = str(mount).split(":", 1)[0]
            if not source.startswith(("/", ".", "~")):
                used_volumes.add(source)
                if source not in volumes:
                    problems.append(f"{name}: volume {source!r} is not declared")
        for net in s.get("networks") or []:
            if net not in networks:
                problems.append(f"{name}: network {net!r} is not declared")
    problems += [f"volume {v!r} is declared but never mounted" for v in set(volumes) - used_volumes]
    return problems


def label_problems(compose: Compose) -> list[str]:
    """The labels minibroker/chaos finds containers by (deploy/.env names the project)."""
    problems = []
    nodes = {n.name: n for n in t.nodes()}
    for name, s in compose["services"].items():
        labels = s.get("labels") or {}
        role = labels.get(t.ROLE_LABEL)
        if role not in ROLES:
            problems.append(f"{name}: label {t.ROLE_LABEL}={role!r} is not one of {sorted(ROLES)}")
        want_id = str(nodes[name].node_id) if name in nodes else None
        if labels.get(t.NODE_ID_LABEL) != want_id:
            problems.append(f"{name}: label {t.NODE_ID_LABEL} should be {want_id!r}")
        if name in nodes and role != nodes[name].role:
            problems.append(f"{name}: role label {role!r}, the topology says {nodes[name].role}")
    return problems


def parity_problems(compose: Compose) -> list[str]:
    """Brokers and controllers are exactly the topology's, with its commands and environment."""
    problems = []
    want = {n.name for n in t.nodes()}
    have = {name for name, s in ours(compose).items() if program(s) in ("broker", "controller")}
    if have != want:
        problems.append(f"broker/controller services {sorted(have)}; topology {sorted(want)}")
    for n, s in node_services(compose):
        if s is None:
            continue
        if argv(s) != t.container_command(n):
            problems.append(f"{n.name}: command differs from topology.container_command")
        if s.get("environment") != t.container_environment():
            problems.append(f"{n.name}: environment differs from topology.container_environment")
    return problems


def port_problems(compose: Compose) -> list[str]:
    """Published on 127.0.0.1 only, once each, host port = container port; what a node
    advertises as EXTERNAL is what is published, and INTERNAL is its service name."""
    problems = []
    seen: dict[int, str] = {}
    published: dict[str, set[int]] = {}
    for name, s in compose["services"].items():
        for spec in s.get("ports") or []:
            m = re.fullmatch(r"127\.0\.0\.1:(\d+):(\d+)", str(spec))
            if m is None:
                problems.append(f"{name}: port {spec!r} is not 127.0.0.1:HOST:CONTAINER")
                continue
            host, container = int(m[1]), int(m[2])
            if host != container:
                problems.append(f"{name}: host port {host} != container port {container}")
            if host in seen:
                problems.append(f"{name}: host port {host} is also published by {seen[host]}")
            seen[host] = name
            published.setdefault(name, set()).add(host)
    for n, s in node_services(compose):
        if s is None:
            continue
        sets = settings_flags(argv(s))
        listeners = _endpoints(sets.get(n.listeners_setting, ""))
        advertised = _endpoints(sets.get(n.advertised_setting, ""))
        ext, internal = t.EXTERNAL, t.INTERNAL
        metrics = int(sets.get("minibroker.metrics.port", "0"))
        want = {listeners.get(ext, ("", 0))[1], metrics}
        if n.role == "broker":
            kafka_ext, kafka_int = t.KAFKA_EXTERNAL, t.KAFKA_INTERNAL
            kafka_port = listeners.get(kafka_ext, ("", 0))[1]
            want.add(kafka_port)
            if advertised.get(kafka_ext) != ("127.0.0.1", kafka_port):
                problems.append(f"{n.name}: {kafka_ext} advertised {advertised.get(kafka_ext)}")
            if advertised.get(kafka_int) != (n.name, listeners.get(kafka_int, ("", -1))[1]):
                problems.append(f"{n.name}: {kafka_int} advertised {advertised.get(kafka_int)}")
        if published.get(n.name, set()) != want:
            problems.append(f"{n.name}: publishes {published.get(n.name)}, serves {want}")
        if advertised.get(ext) != ("127.0.0.1", listeners.get(ext, ("", -1))[1]):
            problems.append(f"{n.name}: EXTERNAL advertised {advertised.get(ext)} is not published")
        if advertised.get(internal) != (n.name, listeners.get(internal, ("", -1))[1]):
            problems.append(f"{n.name}: INTERNAL advertised {advertised.get(internal)}")
        if next(iter(advertised), None) != ext:
            problems.append(f"{n.name}: host tools take the first advertised listener: {ext}")
        health = [str(a) for a in (s.get("healthcheck") or {}).get("test", [])]
        if f"127.0.0.1:{listeners.get(internal, ('', -1))[1]}" not in health:
            problems.append(f"{n.name}: the healthcheck does not ask the INTERNAL listener")
    return problems


def _endpoints(value: str) -> dict[str, tuple[str, int]]:
    out = {}
    for part in filter(None, value.split(",")):
        m = re.fullmatch(r"(\w+)://([^:]+):(\d+)", part)
        if m:
            out[m[1]] = (m[2], int(m[3]))
    return out


def volume_problems(compose: Compose) -> list[str]:
    """Each broker's log.dirs inside a named volume of its own; the load generator and the
    Spark worker share their run dir at the same path (executors write, the driver reads)."""
    problems = []
    owners: dict[str, str] = {}
    for n, s in node_services(compose):
        if s is None or n.role != "broker":
            continue
        log_dir = settings_flags(argv(s)).get("log.dirs") or flag(argv(s), "--log-dir") or ""
        mounts = [str(m).split(":")[:2] for m in s.get("volumes") or []]
        inside = [src for src, dst in mounts if (log_dir + "/").startswith(dst.rstrip("/") + "/")]
        if not inside:
            problems.append(f"{n.name}: log dir {log_dir!r} is not inside a mounted volume")
        for src in inside:
            if src in owners:
                problems.append(f"{n.name}: shares volume {src} with {owners[src]}")
            owners[src] = n.name
    runs = {name: set(s.get("volumes") or []) for name, s in compose["services"].items()}
    if "spark-worker" in runs and not runs["spark-worker"] & runs.get("loadgen", set()):
        problems.append("loadgen and spark-worker must mount the run dir at the same path")
    return problems


def env_problems(compose: Compose) -> list[str]:
    """Our services set only variables the programs read (topology.ENVIRONMENT); ZooKeeper,
    configured by its zoo.cfg, none."""
    problems = []
    for name, s in compose["services"].items():
        for var in environment(s, {}):
            if var not in t.ENVIRONMENT or name == t.ZOOKEEPER:
                problems.append(f"{name}: sets {var}, which nothing there reads")
    return problems


def source_strings() -> set[str]:
    """Every string constant in the programs' source."""
    out: set[str] = set()
    for package in SOURCE_PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    out.add(node.value)
    return out


def health_problems(compose: Compose) -> list[str]:
    """Services that always run have a healthcheck; dependencies wait for it; ours ask
    `minibroker health` with flags its parser accepts."""
    problems = []
    services = compose["services"]
    for name, s in services.items():
        check = s.get("healthcheck") or {}
        if not s.get("profiles") and (not check.get("test") or check.get("disable")):
            problems.append(f"{name}: no healthcheck")
        for dep, cond in (s.get("depends_on") or {}).items():
            if (cond or {}).get("condition") != "service_healthy":
                problems.append(f"{name}: depends_on {dep} without condition: service_healthy")
            elif not (services.get(dep, {}).get("healthcheck") or {}).get("test"):
                problems.append(f"{name}: waits for {dep} to be healthy, which has no check")
        test = [str(a) for a in check.get("test") or []]
        if test[1:2] == ["minibroker"]:
            try:
                with contextlib.redirect_stderr(io.StringIO()):  # argparse's usage block
                    build_parser().parse_args(test[2:])
            except SystemExit:
                problems.append(f"{name}: `minibroker` refuses the healthcheck {test[2:]}")
    return problems


def program_problems(
    compose: Compose, host_env: Mapping[str, str], only: Collection[str] | None = None
) -> list[str]:
    """Each of our services' command is accepted by the program it runs (`--check`, with the
    service's environment under `host_env`); Spark services name a class the image has.
    `only`: check just these services."""
    problems = []
    runs: dict[str, subprocess.Popen[str]] = {}
    spark_class = Path(sys.executable).parent / "spark-class"
    for name, s in ours(compose).items():
        if only is not None and name not in only:
            continue
        args = argv(s)
        # Only the service's own variables: none of the developer's MINIBROKER_* leak in.
        env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
        env |= environment(s, host_env)
        if program(s) is not None:
            command = [sys.executable, *args[1:], "--check"]
        elif args[:1] == ["minibroker"]:  # the console script of the package (the dashboard)
            command = [sys.executable, "-m", "minibroker.cli.main", *args[1:], "--check"]
        elif args[:1] != ["spark-class"] or not spark_class.exists():
            problems.append(f"{name}: runs {args[:1]}, which the image does not have")
            continue
        elif args[1:2] and args[1] not in SPARK_CLASSES:
            problems.append(f"{name}: unknown Spark class {args[1]}")
            continue
        elif shutil.which("java") is None:
            continue  # Spark's own parser needs a JVM; the class name was checked
        else:
            # Spark parses every argument before `--help` and exits 1 on one it does not know.
            command = [str(spark_class), *args[1:], "--help"]
            env |= {"PATH": f"{spark_class.parent}:{env.get('PATH', '')}"}
            env |= {"SPARK_LOCAL_IP": "127.0.0.1"}
        runs[name] = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            env=env,
        )
    nodes = {n.name: n for n in t.nodes()}
    for name, proc in runs.items():
        out, err = proc.communicate(timeout=60)
        if proc.returncode != 0:
            problems.append(f"{name}: {' '.join(err.split())[-300:]}")
            continue
        if not out.startswith("{"):
            continue  # Spark's usage text
        resolved = json.loads(out)
        if name in nodes:
            key = "broker.id" if nodes[name].role == "broker" else "minibroker.controller.id"
            if resolved["settings"][key] != str(nodes[name].node_id):
                problems.append(f"{name}: resolves {key}={resolved['settings'][key]}")
            want = host_env.get("MINIBROKER_PROFILE") or "demo"
            if resolved["profile"] != want:
                problems.append(f"{name}: profile {resolved['profile']}, expected {want}")
    return problems


def check_all(compose: Compose, host_env: Mapping[str, str] | None = None) -> list[str]:
    return [
        *reference_problems(compose),
        *label_problems(compose),
        *parity_problems(compose),
        *port_problems(compose),
        *volume_problems(compose),
        *env_problems(compose),
        *health_problems(compose),
        *program_problems(compose, host_env or {}),
    ]
