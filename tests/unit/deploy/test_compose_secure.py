"""deploy/docker-compose.secure.yml without a Docker engine: valid against the compose
specification, and laid over docker-compose.yml as compose lays it, every node's command is
accepted by its program, every listener is secured, each node holds its own certificate, and the
variables it sets are ones the programs read."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from minibroker import topology as t
from minibroker.localcluster import secure_compose as sc
from tests.unit.deploy import compose_checks as cc
from tests.unit.deploy.test_compose import schema_errors

SECURE = cc.ROOT / "deploy" / "docker-compose.secure.yml"


def merged() -> cc.Compose:
    """The two files as compose merges them: the override's command, healthcheck test and
    scalars replace; its environment, depends_on and labels add; its volumes add."""
    base, over = cc.load(), cc.load(SECURE)
    out = copy.deepcopy(base)
    for name, service in over["services"].items():
        into: dict[str, Any] = out["services"].setdefault(name, {})
        for key, value in service.items():
            if key in ("environment", "depends_on", "labels"):
                into[key] = {**(into.get(key) or {}), **value}
            elif key == "volumes":
                into[key] = [*(into.get(key) or []), *value]
            elif key == "healthcheck":
                into[key] = {**(into.get(key) or {}), **value}
            else:
                into[key] = value
    out["volumes"] = {**(out.get("volumes") or {}), **(over.get("volumes") or {})}
    return out


@pytest.fixture(scope="module")
def secure() -> cc.Compose:
    return merged()


def test_the_secure_file_follows_the_compose_specification() -> None:
    assert schema_errors(SECURE) == ""


def test_every_node_accepts_its_secure_command(secure: cc.Compose) -> None:
    assert cc.program_problems(secure, {}, {n.name for n in t.nodes()}) == []


def test_every_listener_is_secured_with_the_nodes_own_certificate(secure: cc.Compose) -> None:
    for node, service in cc.node_services(secure):
        assert service is not None
        settings = cc.settings_flags(cc.argv(service))
        mapping = settings["listener.security.protocol.map"]
        protocols = dict(p.split(":") for p in mapping.split(","))
        listeners = [e.split("://")[0] for e in settings[node.listeners_setting].split(",")]
        assert {protocols[name] for name in listeners} <= {"SSL", "SASL_SSL"}, node.name
        if node.role == "broker":
            assert protocols[t.KAFKA_EXTERNAL] == protocols[t.KAFKA_INTERNAL] == "SASL_SSL"
            assert settings["super.users"] == "User:admin"
        assert settings["ssl.keystore.location"].endswith(f"/{node.name}.pem")
        assert settings["ssl.client.auth"] == "required"
        assert settings["zookeeper.set.acl"] == "true"
        assert f"{sc.CONTAINER_DIR}" in " ".join(service["volumes"])
        assert service["depends_on"]["security"] == {"condition": "service_completed_successfully"}


def test_the_secure_services_set_only_variables_the_programs_read(secure: cc.Compose) -> None:
    assert cc.env_problems(secure) == []


def test_the_dashboard_serves_the_security_files(secure: cc.Compose) -> None:
    args = cc.argv(secure["services"]["dashboard"])
    assert cc.flag(args, "--dir") == sc.CONTAINER_DIR
    assert "ssl" in " ".join(secure["services"]["dashboard"]["healthcheck"]["test"])
