"""One swarm of three Docker engines for every test in tests/swarm (minibroker/swarm/lab.py:
Docker-in-Docker nodes on this machine), the stack deployed on it as deploy/SWARM.md does, and
after the last test nothing of it left: no node container, volume or network (also when a test
fails)."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from minibroker import topology as t
from minibroker.runtime.zk_store import ZkStore
from minibroker.swarm import stack as st
from minibroker.swarm.lab import LAB_LABEL, SwarmLab
from tests.compose import engine

PREFIX = "mbswtest"
STACK = "mb"


@dataclass
class Swarm:
    lab: SwarmLab
    stack: st.Stack

    @property
    def manager(self) -> str:
        return self.lab.nodes[0].docker_host

    @property
    def zk_connect(self) -> str:
        return f"{self.lab.nodes[0].address}:{t.ZOOKEEPER_PORT}"  # ZooKeeper runs on node-1

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
        lab.up()
        hosts = {t.host_variable(f"broker-{i}"): lab.nodes[i - 1].address for i in (1, 2, 3)}
        st.deploy(lab.nodes[0].docker_host, STACK, engine.ROOT / "deploy" / "stack.yml", hosts)
        stack = st.Stack(
            STACK, lab.nodes[0].docker_host, {n.name: n.docker_host for n in lab.nodes}
        )
        stack.wait_healthy(300)
        yield Swarm(lab, stack)
    finally:
        lab.down()
        assert engine.leftovers(client, PREFIX, LAB_LABEL) == [], "left behind by the swarm lab"
