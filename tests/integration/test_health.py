"""`minibroker health` (the compose healthchecks' command) against real brokers and
controllers: exit 0 only when the asked service is SERVING, else 1 with one line saying why."""

from __future__ import annotations

import time

import pytest

from minibroker import topology
from tests.integration.conftest import Cluster, cli

pytestmark = pytest.mark.integration


def health(*args: str) -> tuple[int, str]:
    result = cli("health", *args, "--timeout", "2", check=False)
    out = (result.stdout + result.stderr).strip()
    assert len(out.splitlines()) == 1, out
    return result.returncode, out


def test_health_answers_per_node_and_service(c: Cluster) -> None:
    brokers = c.state.by_role("broker")
    for b in brokers:
        assert health(b.address) == (0, f"{b.address} (process): SERVING")
        code, line = health(b.address, "--service", topology.BROKER_HEALTH_SERVICE)
        assert code == 0 and line.endswith("SERVING"), line

    active = c.zk.read_controller()
    for ctrl in c.state.by_role("controller"):
        assert health(ctrl.address)[0] == 0  # connected: both active and standby
        code, line = health(ctrl.address, "--service", topology.CONTROL_HEALTH_SERVICE)
        if ctrl.id == active:
            assert code == 0 and line.endswith(": SERVING"), line
        else:
            assert code == 1 and line.endswith(": NOT_SERVING"), line

    code, line = health(brokers[0].address, "--service", "no.such.Service")
    assert code == 1 and "unknown health service 'no.such.Service'" in line

    # A killed broker: nothing answers within the timeout.
    c.cli("cluster", "kill", brokers[1].name)
    started = time.monotonic()
    code, line = health(brokers[1].address)
    assert code == 1 and "no answer within 2 s" in line, line
    assert time.monotonic() - started < 10
