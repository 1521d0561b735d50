"""The static checks are not vacuous: each broken copy of the compose file or the Dockerfile
is caught by the check meant for it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.unit.deploy import compose_checks as cc
from tests.unit.deploy import dockerfile_checks as dc
from tests.unit.deploy.test_compose import schema_errors

Mutation = Callable[[dict[str, Any]], None]


def append(service: str, text: str) -> Mutation:
    """More arguments at the end of a service's command (a string or a list)."""

    def mutate(c: dict[str, Any]) -> None:
        command = c["services"][service]["command"]
        if isinstance(command, str):
            c["services"][service]["command"] = command + text
        else:
            command += text.split()

    return mutate


DELETE = object()


def _parent(c: dict[str, Any], path: str) -> tuple[Any, Any]:
    """The container holding a `/`-separated path's last step, and that step."""
    node: Any = c
    *parents, last = path.split("/")
    for p in parents:
        node = node[int(p)] if isinstance(node, list) else node[p]
    return node, int(last) if isinstance(node, list) else last


def setitem(path: str, value: Any) -> Mutation:
    def mutate(c: dict[str, Any]) -> None:
        parent, key = _parent(c, path)
        if value is DELETE:
            del parent[key]
        else:
            parent[key] = value

    return mutate


def replace(path: str, old: str, new: str) -> Mutation:
    def mutate(c: dict[str, Any]) -> None:
        parent, key = _parent(c, path)
        assert old in parent[key]
        parent[key] = parent[key].replace(old, new)

    return mutate


def program(c: cc.Compose) -> list[str]:
    return cc.program_problems(c, {})


S = "services/"
COMPOSE_BREAKAGES: list[tuple[str, Mutation, Callable[[cc.Compose], list[str]]]] = [
    ("a flag the broker lacks", append("broker-2", " --no-such-flag"), program),
    ("a misspelt setting", append("broker-1", " --set replica.lag.time.max.msx=1"), program),
    ("a bad value", append("controller-1", " --set zookeeper.session.timeout.ms=soon"), program),
    (
        "a listener without a protocol",
        replace(S + "broker-3/command", "INTERNAL:PLAINTEXT,", ""),
        program,
    ),
    ("a flag the load generator lacks", append("loadgen", " --recrods 5"), program),
    ("a flag the Spark worker lacks", append("spark-worker", " --cpus 2"), program),
    ("a Spark class not in the image", setitem(S + "spark-master/entrypoint/1", "Mastr"), program),
    (
        "an unread variable",
        setitem(S + "controller-2/environment/MINIBROKER_ZOOKEEPER", "x"),
        cc.env_problems,
    ),
    (
        "a variable no program reads",
        setitem(S + "broker-1/environment/ZOO_TICK_TIME", "1"),
        cc.env_problems,
    ),
    ("a port on every interface", setitem(S + "broker-1/ports/0", "19001:19001"), cc.port_problems),
    (
        "a port not advertised",
        setitem(S + "broker-2/ports/0", "127.0.0.1:19012:19012"),
        cc.port_problems,
    ),
    (
        "a port published twice",
        setitem(S + "controller-2/ports/1", "127.0.0.1:29101:29101"),
        cc.port_problems,
    ),
    (
        "an unknown dependency",
        setitem(S + "broker-1/depends_on/zookeper", {}),
        cc.reference_problems,
    ),
    (
        "a dependency not waited for",
        setitem(S + "controller-1/depends_on/zookeeper/condition", "service_started"),
        cc.health_problems,
    ),
    (
        "an undeclared volume",
        setitem(S + "broker-3/volumes/0", "broker3:/var/lib/minibroker"),
        cc.reference_problems,
    ),
    (
        "logs outside the volume",
        setitem(S + "broker-1/volumes/0", "broker-1-data:/data"),
        cc.volume_problems,
    ),
    (
        "a shared log volume",
        setitem(S + "broker-2/volumes/0", "broker-1-data:/var/lib/minibroker"),
        cc.volume_problems,
    ),
    ("a wrong node id", setitem(S + "broker-2/labels/minibroker.node-id", "3"), cc.label_problems),
    ("no healthcheck", setitem(S + "controller-1/healthcheck", DELETE), cc.health_problems),
    (
        "a healthcheck flag minibroker lacks",
        setitem(S + "broker-1/healthcheck/test", ["CMD", "minibroker", "health", "--servce", "x"]),
        cc.health_problems,
    ),
    (
        "a setting only compose has",
        append("broker-1", " --set min.insync.replicas=2"),
        cc.parity_problems,
    ),
]


@pytest.mark.parametrize(
    ("mutate", "check"),
    [(m, c) for _, m, c in COMPOSE_BREAKAGES],
    ids=[name for name, _, _ in COMPOSE_BREAKAGES],
)
def test_a_broken_compose_file_is_caught(
    mutate: Mutation, check: Callable[[cc.Compose], list[str]]
) -> None:
    original = cc.load()
    broken = copy.deepcopy(original)
    mutate(broken)
    if check is program:
        # Running programs is slow: only the broken service (test_compose runs all of them).
        changed = {k for k, v in broken["services"].items() if v != original["services"][k]}
        assert cc.program_problems(broken, {}, only=changed) != []
    else:
        assert check(original) == []
        assert check(broken) != []


def test_a_file_outside_the_specification_is_caught(tmp_path: Path) -> None:
    broken = cc.load()
    broken["services"]["broker-1"]["healthcheck"]["intervall"] = "3s"
    path = tmp_path / "docker-compose.yml"
    path.write_text(json.dumps(broken))  # JSON is YAML
    assert "intervall" in schema_errors(path)


DOCKERFILE_BREAKAGES = [
    ("a package not copied", "COPY loadgen ./loadgen\n", ""),
    (
        "root at the end",
        'CMD ["python", "-m", "loadgen", "--help"]\n',
        'CMD ["python", "-m", "loadgen", "--help"]\nUSER root\n',
    ),
    (
        "Java in the runtime",
        "FROM ${JAVA_IMAGE} AS loadgen\n",
        "RUN apt-get install -y openjdk-17-jre-headless\nFROM ${JAVA_IMAGE} AS loadgen\n",
    ),
    (
        "a compiler in the runtime",
        "FROM ${JAVA_IMAGE} AS loadgen\n",
        "RUN apt-get install -y gcc\nFROM ${JAVA_IMAGE} AS loadgen\n",
    ),
    ("no gRPC healthcheck", 'CMD ["minibroker", "health"', 'CMD ["true"'),
    ("stale generated code unchecked", "gen_proto.py --check", "gen_proto.py"),
    ("no Java for Spark", "openjdk-17-jre-headless", "curl"),
]


@pytest.mark.parametrize(
    ("old", "new"),
    [(o, n) for _, o, n in DOCKERFILE_BREAKAGES],
    ids=[name for name, _, _ in DOCKERFILE_BREAKAGES],
)
def test_a_broken_dockerfile_is_caught(old: str, new: str) -> None:
    text = dc.DOCKERFILE.read_text()
    assert old in text
    assert dc.check_all(text.replace(old, new), dc.DOCKERIGNORE.read_text()) != []


def test_a_package_hidden_by_dockerignore_is_caught() -> None:
    ignore = dc.DOCKERIGNORE.read_text() + "loadgen\n"
    assert dc.check_all(dc.DOCKERFILE.read_text(), ignore) != []
