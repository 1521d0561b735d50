"""The walking skeleton, for real: ZooKeeper, 3 brokers and 2 controllers as processes."""

from __future__ import annotations

import json
import time

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from minibroker import localcluster
from minibroker.core.zk_layout import BrokerIdZNode, ControllerEpochZNode, ControllerZNode
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import Stat
from tests.integration.conftest import SESSION_TIMEOUT_MS, Cluster, cli

pytestmark = pytest.mark.integration

# Waits allow the session timeout plus generous slack for a loaded 2-core CI machine; the
# measured times are printed (and recorded by the demo), never asserted.
EXPIRY_WAIT_S = SESSION_TIMEOUT_MS / 1000 + 15


def active_controller(c: Cluster) -> localcluster.ProcessInfo:
    cid = c.zk.read_controller()
    return next(p for p in c.state.by_role("controller") if p.id == cid)


def test_up_registers_brokers_with_kafkas_json_and_elects_a_controller(c: Cluster) -> None:
    tree = json.loads(c.cli("zk", "tree", "--json").stdout)
    nodes = {n["path"]: n for n in tree}
    for broker in c.state.by_role("broker"):
        assert broker.id is not None
        node = nodes[f"/brokers/ids/{broker.id}"]
        reg = BrokerIdZNode.decode(broker.id, node["data"].encode())
        assert reg.version == 4
        assert reg.endpoint() == (broker.host, broker.port)
        assert node["ephemeral_owner"] != 0
        # Registered by create + setData in one multi: dataVersion 1 (reference §1.3).
        assert node["version"] == 1
        # The broker epoch is the znode's czxid.
        assert c.status()["registered_brokers"][str(broker.id)]["broker_epoch"] == node["czxid"]
    controller_id = ControllerZNode.decode(nodes["/controller"]["data"].encode())
    assert controller_id in {p.id for p in c.state.by_role("controller")}
    assert nodes["/controller_epoch"]["data"] == "1"
    assert "/isr_change_notification" in nodes and "/cluster/id" in nodes


def test_status_json_describes_every_process(c: Cluster) -> None:
    st = c.status()
    assert st["zookeeper_connect"] == c.state.zk_connect
    assert st["controller"]["epoch"] == 1
    names = {p["name"]: p for p in st["processes"]}
    assert set(names) == {
        "zookeeper",
        "broker-1",
        "broker-2",
        "broker-3",
        "controller-1",
        "controller-2",
    }
    for p in names.values():
        assert p["alive"] and p["pid"] > 0 and p["log_file"] and p["data_dir"]
    text = c.cli("cluster", "status").stdout
    assert "brokers registered in ZooKeeper: 1, 2, 3" in text


def test_brokers_serve_grpc_health_and_lead_clients_to_zookeeper(c: Cluster) -> None:
    for broker in c.state.by_role("broker"):
        with grpc.insecure_channel(broker.address) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            resp = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING
    active_id = c.zk.read_controller()
    for ctrl in c.state.by_role("controller"):
        with grpc.insecure_channel(ctrl.address) as ch:
            stub = health_pb2_grpc.HealthStub(ch)
            overall = stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            assert overall.status == health_pb2.HealthCheckResponse.SERVING
            control = stub.Check(
                health_pb2.HealthCheckRequest(service="minibroker.v1.Control"), timeout=5
            )
            expected = (
                health_pb2.HealthCheckResponse.SERVING
                if ctrl.id == active_id
                else health_pb2.HealthCheckResponse.NOT_SERVING
            )
            assert control.status == expected, ctrl.name
    # --bootstrap: any broker's address is enough to find the cluster's ZooKeeper.
    out = cli(
        "zk", "tree", "--path", "/brokers/ids", "--bootstrap", c.state.by_role("broker")[0].address
    )
    assert "/brokers/ids/3" in out.stdout
    # ... and so are the environment variables, in place of flags.
    first_broker = c.state.by_role("broker")[0].address
    for env in ({"MINIBROKER_ZK": c.state.zk_connect}, {"MINIBROKER_BOOTSTRAP": first_broker}):
        out = cli("zk", "tree", "--path", "/controller", env=env)
        assert '"brokerid":' in out.stdout
    bad = cli("zk", "tree", "--bootstrap", "127.0.0.1:1", check=False)
    assert bad.returncode == 1 and "cannot reach the cluster" in bad.stderr


def test_killing_the_active_controller_hands_over_with_epoch_plus_one(c: Cluster) -> None:
    victim = active_controller(c)
    epoch_before = c.zk.read_controller_epoch()
    assert epoch_before is not None
    killed_at = time.monotonic()
    c.cli("cluster", "kill", victim.name)
    new_id = wait_until(
        lambda: (cid := c.zk.read_controller()) is not None and cid != victim.id and cid,
        timeout_s=EXPIRY_WAIT_S,
        what="the standby to take over",
    )
    print(f"controller failover took {time.monotonic() - killed_at:.2f} s")
    epoch_after = c.zk.read_controller_epoch()
    assert epoch_after is not None and epoch_after[0] == epoch_before[0] + 1
    new = next(p for p in c.state.by_role("controller") if p.id == new_id)
    events = [e["event"] for e in c.log_events(new.name)]
    assert "controller_standby" in events and "controller_elected" in events
    assert events.index("controller_standby") < events.index("controller_elected")
    assert c.status()["controller"]["name"] == new.name


def test_killed_broker_znode_goes_when_its_session_expires(c: Cluster) -> None:
    c.cli("cluster", "kill", "broker-2")
    assert not localcluster.is_alive(c.reload().process("broker-2"))
    wait_until(
        lambda: c.zk.exists(BrokerIdZNode.path(2)) is None,
        timeout_s=EXPIRY_WAIT_S,
        what="/brokers/ids/2 to disappear",
    )
    assert c.zk.exists(BrokerIdZNode.path(1)) is not None


def test_stopped_broker_deregisters_at_once_and_restarts_with_a_new_epoch(c: Cluster) -> None:
    epoch_before = c.zk.exists(BrokerIdZNode.path(1))
    assert epoch_before is not None
    c.cli("cluster", "stop", "broker-1")
    # A clean stop closes the session, so the znode is gone without waiting for expiry.
    assert c.zk.exists(BrokerIdZNode.path(1)) is None
    assert c.log_events("broker-1")[-1]["event"] == "broker_stopped"
    c.cli("cluster", "restart", "broker-1")
    stat = wait_until(
        lambda: c.zk.exists(BrokerIdZNode.path(1)),
        timeout_s=EXPIRY_WAIT_S,
        what="broker-1 to register again",
    )
    assert stat.czxid > epoch_before.czxid


def test_restart_after_kill_waits_for_the_old_session(c: Cluster) -> None:
    old = c.zk.exists(BrokerIdZNode.path(3))
    assert old is not None
    c.cli("cluster", "kill", "broker-3")
    c.cli("cluster", "restart", "broker-3")

    def reregistered() -> Stat | None:
        s = c.zk.exists(BrokerIdZNode.path(3))
        return s if s is not None and s.czxid > old.czxid else None

    stat = wait_until(
        reregistered,
        timeout_s=EXPIRY_WAIT_S,
        what="broker-3 to register with a new session",
    )
    assert stat.version == 1


def test_broker_reregisters_after_its_session_expires(c: Cluster) -> None:
    old = c.zk.exists(BrokerIdZNode.path(3))
    assert old is not None
    c.cli("cluster", "pause", "broker-3")
    assert c.status()["processes"][3]["state"] == "paused"
    wait_until(
        lambda: c.zk.exists(BrokerIdZNode.path(3)) is None,
        timeout_s=EXPIRY_WAIT_S,
        what="the paused broker's session to expire",
    )
    c.cli("cluster", "resume", "broker-3")
    new = wait_until(
        lambda: c.zk.exists(BrokerIdZNode.path(3)),
        timeout_s=EXPIRY_WAIT_S,
        what="broker-3 to re-register",
    )
    assert new.czxid > old.czxid  # a new broker epoch

    # The broker logs `broker_registered` once the znode is made: its line may follow the
    # znode by a moment (CI read the log between the two).
    def registered_twice() -> list[str] | None:
        events = [e["event"] for e in c.log_events("broker-3")]
        return events if events.count("broker_registered") >= 2 else None

    events = wait_until(registered_twice, timeout_s=10, what="a second broker_registered")
    assert "zk_session_expired" in events
    assert events.count("broker_registered") == 2


def test_paused_controller_resigns_when_it_wakes_to_an_expired_session(c: Cluster) -> None:
    victim = active_controller(c)
    c.cli("cluster", "pause", victim.name)
    wait_until(
        lambda: (cid := c.zk.read_controller()) is not None and cid != victim.id,
        timeout_s=EXPIRY_WAIT_S,
        what="the standby to take over from the paused controller",
    )
    c.cli("cluster", "resume", victim.name)
    wait_until(
        lambda: any(
            e["event"] == "controller_resigned" and e["reason"] == "zk_session_expired"
            for e in c.log_events(victim.name)
        ),
        timeout_s=EXPIRY_WAIT_S,
        what="the old controller to resign",
    )
    wait_until(
        lambda: any(e["event"] == "controller_standby" for e in c.log_events(victim.name)[-3:]),
        timeout_s=EXPIRY_WAIT_S,
        what="the old controller to stand by",
    )
    assert c.zk.read_controller() != victim.id
    epoch = c.zk.get(ControllerEpochZNode.path)[0]
    assert epoch == b"2"


def test_down_leaves_no_process_behind(c: Cluster) -> None:
    c.cli("cluster", "pause", "broker-1")  # even a stopped process must go
    out = c.cli("cluster", "down").stdout
    assert "no process left" in out
    for p in c.reload().processes:
        assert localcluster.process_state(p) == "dead"
