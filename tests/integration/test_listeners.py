"""Two listeners per broker and controller, as in the compose cluster (KIP-103): clients get
the endpoints of the listener they came in on, replication and controlled shutdown go over the
inter-broker listener, and `minibroker events` reaches every process through ZooKeeper."""

from __future__ import annotations

import functools
import json

import grpc
import pytest

from minibroker import localcluster
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import BrokerIdZNode, ControllerEndpointZNode
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.waiting import WaitTimeout, wait_until
from tests.integration import rpc
from tests.integration.conftest import Cluster, cli

pytestmark = pytest.mark.integration

TP = TopicPartition("two-listeners", 0)


def _two_listeners(c: Cluster) -> dict[str, int]:
    """Restart every broker and controller with INTERNAL (its old port) and EXTERNAL (a new
    port, advertised first) listeners; returns the EXTERNAL port by process name."""
    state = c.reload()
    programs = [p for p in state.processes if p.role in ("broker", "controller")]
    external = dict(
        zip((p.name for p in programs), localcluster.free_ports(len(programs)), strict=True)
    )
    for p in programs:  # stopped first: the state file must name what runs
        localcluster.send(state, p.name, "stop")
    for p in programs:
        ext = external[p.name]
        prefix = "" if p.role == "broker" else "minibroker.controller."
        p.cmd += [
            "--set", f"{prefix}listeners=INTERNAL://127.0.0.1:{p.port},EXTERNAL://127.0.0.1:{ext}",
            "--set", f"{prefix}advertised.listeners=EXTERNAL://127.0.0.1:{ext},INTERNAL://127.0.0.1:{p.port}",
            "--set", "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
            "--set", "inter.broker.listener.name=INTERNAL",
        ]  # fmt: skip
    state.save()
    for p in programs:
        localcluster.restart(state, p.name)

    def registered_twice(broker_id: int) -> bool:
        got = c.zk.get_or_none(BrokerIdZNode.path(broker_id))
        return got is not None and b"EXTERNAL" in (got[0] or b"")

    for broker_id in [p.id for p in state.by_role("broker") if p.id is not None]:
        wait_until(
            functools.partial(registered_twice, broker_id),
            timeout_s=30,
            what=f"broker {broker_id} to register two listeners",
        )
    return external


def _metadata_ports(address: str) -> dict[int, int]:
    with grpc.insecure_channel(address) as channel:
        resp = broker_pb2_grpc.BrokerStub(channel).Metadata(
            broker_pb2.MetadataRequest(), timeout=10
        )
    return {b.node_id: b.port for b in resp.brokers}


def test_each_listener_answers_with_its_own_endpoints_and_replication_uses_internal(
    c: Cluster,
) -> None:
    external = _two_listeners(c)
    brokers = c.state.by_role("broker")
    internal_ports = {p.id: p.port for p in brokers}
    external_ports = {p.id: external[p.name] for p in brokers}

    seen: list[object] = []

    def both_listeners_answer() -> bool:
        answers = (
            _metadata_ports(brokers[0].address),
            _metadata_ports(f"127.0.0.1:{external_ports[1]}"),
        )
        seen[:] = [answers]
        return answers == (internal_ports, external_ports)

    try:
        wait_until(
            both_listeners_answer, timeout_s=30, what="metadata of all brokers on both listeners"
        )
    except WaitTimeout as exc:
        raise AssertionError(
            f"{exc}: wanted {(internal_ports, external_ports)}, got {seen}"
        ) from None

    # Registration: EXTERNAL first (what host tools pick), both endpoints, both protocols.
    got = c.zk.get_or_none(BrokerIdZNode.path(1))
    assert got is not None
    reg = json.loads(got[0] or b"{}")
    assert reg["endpoints"] == [
        f"EXTERNAL://127.0.0.1:{external_ports[1]}",
        f"INTERNAL://127.0.0.1:{internal_ports[1]}",
    ]
    assert reg["listener_security_protocol_map"] == {
        "INTERNAL": "PLAINTEXT",
        "EXTERNAL": "PLAINTEXT",
    }
    controller = c.state.by_role("controller")[0]
    got = c.zk.get_or_none(ControllerEndpointZNode.path(controller.id or 0))
    assert got is not None
    assert ControllerEndpointZNode.decode(got[0])[0] == (
        f"EXTERNAL://127.0.0.1:{external[controller.name]}"
    )

    # acks=all through the EXTERNAL listener: followers must fetch over INTERNAL to ack it.
    c.cli("topics", "create", TP.topic, "--partitions", "1", "--replication-factor", "3", "--wait")
    leader = wait_until(
        lambda: rpc.metadata(f"127.0.0.1:{external_ports[1]}", TP.topic).get(0),
        timeout_s=30,
        what="a leader",
    )[0]
    produced = rpc.produce(f"127.0.0.1:{external_ports[leader]}", TP, rpc.batch(b"x", b"y"))
    assert produced.error.name == "NONE", produced

    # Host tools find every process through ZooKeeper on the first (EXTERNAL) listener.
    out = cli("events", "--zk", c.state.zk_connect, "--json", "--event", "broker_listening")
    procs = {json.loads(line)["proc"] for line in out.stdout.splitlines()}
    assert {"broker-1", "broker-2", "broker-3"} <= procs
    out = cli("events", "--zk", c.state.zk_connect, "--json", "--event", "controller_listening")
    assert len(out.stdout.splitlines()) == 2
    inside = cli(
        "events", "--zk", c.state.zk_connect, "--json", "--event", "broker_listening",
        env={"MINIBROKER_LISTENER": "INTERNAL"},
    )  # fmt: skip
    assert len(inside.stdout.splitlines()) == 3

    # Controlled shutdown reaches the controller over INTERNAL and moves the leadership.
    c.cli("cluster", "stop", f"broker-{leader}")
    events = [e["event"] for e in c.log_events(f"broker-{leader}")]
    assert "controlled_shutdown_succeeded" in events
