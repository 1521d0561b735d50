"""`cluster up --proxy` as planned: every link of the topology in the proxy's table, each one
forwarding to the listener its target serves that source on, and every program advertising,
for each listener, the proxy's port of the matching link (checked by the programs' --check)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minibroker import localcluster
from minibroker import topology as t
from minibroker.core.listeners import parse_listeners
from minibroker.faultproxy.model import LinkSpec
from minibroker.runtime import zk_server


def plan(tmp_path: Path, brokers: int = 3, controllers: int = 2) -> localcluster.ClusterState:
    return localcluster.plan(
        tmp_path,
        brokers=brokers,
        controllers=controllers,
        overrides=[],
        profile="demo",
        zk_port=None,
        broker_port_base=19001,
        proxy=True,
        kafka_port_base=19092,
    )


@pytest.fixture(autouse=True)
def no_zookeeper_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    # plan() starts nothing; it only needs to know where ZooKeeper would come from.
    monkeypatch.setattr(
        zk_server, "find_zookeeper", lambda: zk_server.ZooKeeperInstall("java", "zk.jar")
    )


def checked_settings(cmds: list[list[str]]) -> list[dict[str, str]]:
    """Each program's resolved settings from `--check` (run side by side)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINIBROKER_")}
    procs = [
        subprocess.Popen([*c, "--check"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         stdin=subprocess.DEVNULL, text=True, env=env)
        for c in cmds
    ]  # fmt: skip
    out = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=60)
        assert p.returncode == 0, stderr
        out.append(json.loads(stdout)["settings"])
    return out


def test_the_proxy_starts_first_and_carries_every_link_of_the_topology(tmp_path: Path) -> None:
    state = plan(tmp_path)
    assert [p.name for p in state.processes[:2]] == ["zookeeper", localcluster.FAULT_PROXY]
    proxy = state.fault_proxy()
    assert proxy is not None and proxy.cmd[-4:] == [
        "--port",
        str(proxy.port),
        "--name",
        "faultproxy",
    ]
    links = [LinkSpec.from_json(o) for o in state.proxy_links]
    assert [(s.source, s.target) for s in links] == t.proxy_links(t.nodes())
    ports = [s.listen_port for s in links] + [p.port for p in state.processes]
    assert len(set(ports)) == len(ports) - 5  # a node's recorded port is its client link's
    by_name = {s.name: s for s in links}
    # --broker-port-base pins what clients dial: the client links.
    assert [by_name[f"client->broker-{i}"].listen_port for i in (1, 2, 3)] == [19001, 19002, 19003]
    # --kafka-port-base pins what Kafka clients dial: the Kafka-client links (issue 39 §1).
    kafka = [by_name[f"kafka-client->broker-{i}"].listen_port for i in (1, 2, 3)]
    assert kafka == [19092, 19093, 19094]
    assert [state.process(f"broker-{i}").kafka_port for i in (1, 2, 3)] == kafka
    # Below the ephemeral range: no connect() or bind(0) elsewhere takes them before use.
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    assert max(ports) < low
    zk_port = state.process("zookeeper").port
    assert all(s.target_port == zk_port for s in links if s.target == "zookeeper")


def test_every_program_listens_per_source_and_advertises_the_links(tmp_path: Path) -> None:
    state = plan(tmp_path)
    links = {(s.source, s.target): s for s in map(LinkSpec.from_json, state.proxy_links)}
    nodes = t.nodes()
    resolved = checked_settings([state.process(n.name).cmd for n in nodes])
    for node, settings in zip(nodes, resolved, strict=True):
        prefix = "" if node.role == "broker" else "minibroker.controller."
        listen = {e.listener: e.port for e in parse_listeners(settings[f"{prefix}listeners"])}
        advertised = parse_listeners(settings[f"{prefix}advertised.listeners"])
        assert advertised[0].listener == "CLIENT"
        assert settings["inter.broker.listener.name"] == t.source_listener(node)
        assert settings["zookeeper.connect"] == links[(node.name, "zookeeper")].listen_address
        for listener, source in t.node_listeners(node, nodes):
            ep = next(e for e in advertised if e.listener == listener)
            if source is None:  # a broker's own inter-broker listener: nobody dials it
                assert ep.port == listen[listener]
                continue
            link = links[(source, node.name)]
            assert (ep.port, link.target_port) == (link.listen_port, listen[listener])
        assert state.process(node.name).port == links[("client", node.name)].listen_port
        if node.role == "broker":  # Kafka clients reach its KAFKA listener through the proxy
            link = links[("kafka-client", node.name)]
            assert state.process(node.name).kafka_port == link.listen_port
            assert link.target_port == listen["KAFKA"]


def test_one_broker_and_one_controller_still_check(tmp_path: Path) -> None:
    state = plan(tmp_path, brokers=1, controllers=1)
    # To ZooKeeper; c->b, b->c; clients' (gRPC to both, Kafka to the broker).
    assert len(state.proxy_links) == 2 + 1 + 1 + 2 + 1
    resolved = checked_settings([state.process(n).cmd for n in ("broker-1", "controller-1")])
    assert resolved[0]["listeners"].split(",")[1].startswith("KAFKA://")
    assert resolved[0]["listeners"].split(",")[2].startswith("B1://")


def test_without_the_proxy_nothing_changes(tmp_path: Path) -> None:
    state = localcluster.plan(
        tmp_path, brokers=3, controllers=2, overrides=[], profile="demo", zk_port=None,
        broker_port_base=None,
    )  # fmt: skip
    assert state.fault_proxy() is None and state.proxy_links == []
    broker = state.process("broker-1")
    listeners = f"PLAINTEXT://127.0.0.1:{broker.port},KAFKA://127.0.0.1:{broker.kafka_port}"
    assert f"listeners={listeners}" in broker.cmd
    assert broker.cmd[broker.cmd.index("--zk") + 1] == state.zk_connect
    assert sys.executable == broker.cmd[0]


def test_kafka_ports_pinned_without_the_proxy(tmp_path: Path) -> None:
    state = localcluster.plan(
        tmp_path, brokers=3, controllers=2, overrides=[], profile="demo", zk_port=None,
        broker_port_base=None, kafka_port_base=39092,
    )  # fmt: skip
    assert [state.process(f"broker-{i}").kafka_port for i in (1, 2, 3)] == [39092, 39093, 39094]
    assert "listeners=PLAINTEXT://127.0.0.1:" in " ".join(state.process("broker-2").cmd)
    assert any(a.endswith(",KAFKA://127.0.0.1:39093") for a in state.process("broker-2").cmd)
