"""One swarm of three Docker engines for every test in tests/swarm (minibroker/swarm/lab.py:
Docker-in-Docker machines on this machine), formed and deployed by deploy/SWARM.md's own blocks
(swarm-init, swarm-labels, swarm-images, swarm-deploy) run as written, and after the last test
removed by its `swarm-down` and the lab's down: no node container, volume or network left (also
when a test fails)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from minibroker import topology as t
from minibroker.runtime.zk_store import ZkStore
from minibroker.swarm import stack as st
from minibroker.swarm.backend import SwarmBackend
from minibroker.swarm.lab import LAB_LABEL, SwarmLab
from tests.compose import engine

PREFIX = "mbswtest"
STACK = "minibroker"  # SWARM.md's (the CLI's default)
SWARM_DOC = engine.ROOT / "deploy" / "SWARM.md"
SET_UP = ("swarm-init", "swarm-labels", "swarm-images", "swarm-deploy")


@dataclass
class Swarm:
    lab: SwarmLab
    backend: SwarmBackend
    env: dict[str, str]  # what a reader's shell has after SWARM.md's "Before you start"

    @property
    def stack(self) -> st.Stack:
        return self.backend.stack

    @property
    def zk_connect(self) -> str:
        return self.env["MINIBROKER_ZK"]  # ZooKeeper runs on node-1

    @property
    def bootstrap_servers(self) -> str:
        """Each broker's KAFKA_EXTERNAL listener at its node's address (host-mode ports)."""
        brokers = [n for n in t.nodes() if n.role == "broker"]
        return ",".join(
            f"{self.lab.nodes[n.index - 1].address}:{n.kafka_external_port}" for n in brokers
        )

    def zk(self) -> ZkStore:
        zk = ZkStore(self.zk_connect, session_timeout_ms=10_000)
        zk.start()
        return zk

    def block(self, name: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        """deploy/SWARM.md's walkthrough block `name`, as written."""
        return engine.run_block(name, self.env, timeout=timeout, doc=SWARM_DOC)


@pytest.fixture(scope="package")
def swarm() -> Iterator[Swarm]:
    client = engine.engine_or_skip()
    built = subprocess.run(
        ["bash", str(engine.ROOT / "deploy" / "build-images.sh"), "--swarm"],
        capture_output=True, text=True, check=False, stdin=subprocess.DEVNULL, timeout=3600,
    )  # fmt: skip
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    lab = SwarmLab(PREFIX, client=client)
    try:
        lab.up(form=False)  # bare engines: the walkthrough forms the swarm
        env = {**engine.cli_env(), **lab.variables()}
        env.pop("COMPOSE_PROJECT_NAME", None)
        swarm = Swarm(lab, SwarmBackend(STACK, lab.variables()["MINIBROKER_ZK"], lab.access()), env)
        for name in SET_UP:
            swarm.block(name)
        yield swarm
        swarm.block("swarm-down")
    finally:
        lab.down()
        assert engine.leftovers(client, PREFIX, LAB_LABEL) == [], "left behind by the swarm lab"
