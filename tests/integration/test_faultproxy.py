"""`cluster up --proxy`: every link goes through the fault proxy, and cutting links does what
a real partition does: a follower cut from the brokers leaves the ISR and rejoins when healed,
a leader cut from ZooKeeper loses its session and its leadership while clients still reach it,
without losing an acks=all record, and a broker cut from everything is unreachable."""

from __future__ import annotations

import contextlib
import itertools
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from minibroker.chaos import NetworkFault, ProcessBackend
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import BrokerIdZNode
from minibroker.faultproxy.model import LinkSpec
from minibroker.rpc import broker_pb2
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.integration import rpc
from tests.integration.conftest import SESSION_TIMEOUT_MS, Cluster, cli, running_cluster

pytestmark = pytest.mark.integration

# The session timeout plus generous slack for a loaded 2-core machine (never asserted tighter).
EXPIRY_WAIT_S = SESSION_TIMEOUT_MS / 1000 + 15


@pytest.fixture
def pc(tmp_path: Path) -> Iterator[Cluster]:
    d = tmp_path / "cluster"
    timeout = f"zookeeper.session.timeout.ms={SESSION_TIMEOUT_MS}"
    with running_cluster(d, "--proxy", "--set", timeout) as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)  # direct: never faulted
        zk.start()
        try:
            yield Cluster(d, state, zk)
        finally:
            zk.stop()


def create_topic(c: Cluster, topic: str) -> TopicPartition:
    c.cli("topics", "create", topic, "--partitions", "1", "--replication-factor", "3",
          "--config", "min.insync.replicas=2", "--wait")  # fmt: skip
    tp = TopicPartition(topic, 0)
    wait_until(lambda: _isr(c, tp) == {1, 2, 3}, timeout_s=30, what=f"{tp} fully in sync")
    return tp


def _state(c: Cluster, tp: TopicPartition) -> tuple[int, set[int]]:
    s = c.zk.read_partition_state(tp)
    assert s is not None
    return s.leader, set(s.isr)


def _isr(c: Cluster, tp: TopicPartition) -> set[int]:
    return _state(c, tp)[1]


def address(c: Cluster, broker_id: int) -> str:
    """Where clients reach a broker: the proxy's client link to it."""
    return c.state.process(f"broker-{broker_id}").address


def produce(c: Cluster, broker_id: int, tp: TopicPartition, value: bytes, acks: int = -1) -> int:
    """The offset the broker acknowledged `value` at, or -1 for an error or no answer."""
    with contextlib.suppress(grpc.RpcError):
        got = rpc.produce(address(c, broker_id), tp, rpc.batch(value), acks=acks, timeout_ms=1500)
        if got.error is ErrorCode.NONE:
            return got.base_offset
    return -1


def links(c: Cluster) -> dict[str, dict[str, object]]:
    return {v["name"]: v for v in json.loads(c.cli("cluster", "links", "--json").stdout)}


def test_every_link_goes_through_the_proxy_and_acks_all_works(pc: Cluster) -> None:
    state = pc.state
    table = {LinkSpec.from_json(o).name: LinkSpec.from_json(o) for o in state.proxy_links}
    # 5 to ZooKeeper, 3*2 broker pairs, 2*3 each way, 5 client links, 3 Kafka-client links.
    assert len(table) == 31
    # Registrations advertise the proxy's ports: CLIENT first (what tools pick), then one
    # listener per peer; a peer dials its own listener name, so its own link.
    got = pc.zk.get(BrokerIdZNode.path(2))[0]
    endpoints = BrokerIdZNode.decode(2, got).endpoints
    assert endpoints[0] == f"CLIENT://{table['client->broker-2'].listen_address}"
    assert f"B1://{table['broker-1->broker-2'].listen_address}" in endpoints
    assert f"C101://{table['controller-1->broker-2'].listen_address}" in endpoints
    assert address(pc, 2) == table["client->broker-2"].listen_address

    tp = create_topic(pc, "through")
    values = [f"v{i}" for i in range(200)]
    out = subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", "produce", tp.topic, "--acks", "all",
         "--json", "--dir", str(pc.dir)],
        input="\n".join(values), capture_output=True, text=True, timeout=60, check=True,
    )  # fmt: skip
    assert [json.loads(line)["value"] for line in out.stdout.splitlines()] == values
    read = pc.cli("consume", tp.topic, "--from-beginning", "--until-hw").stdout.split()
    assert read == values

    carried = links(pc)
    for name in ("broker-1->zookeeper", "controller-1->zookeeper", "client->broker-1"):
        assert carried[name]["accepted"], f"nothing went through {name}"
    leader, _ = _state(pc, tp)
    followers = [b for b in (1, 2, 3) if b != leader]
    for f in followers:  # acks=all: both followers fetched through their own links
        backward = carried[f"broker-{f}->broker-{leader}"]["backward"]
        assert isinstance(backward, dict) and backward["bytes"] > 2000
    status = pc.status()
    proxy = next(p for p in status["processes"] if p["name"] == "faultproxy")
    assert proxy["alive"] and proxy["role"] == "faultproxy"


def test_a_follower_cut_from_the_brokers_leaves_the_isr_and_rejoins(pc: Cluster) -> None:
    tp = create_topic(pc, "cut-follower")
    out = pc.cli("cluster", "isolate", "follower", "--topic", tp.topic, "--from", "brokers")
    victim = out.stdout.split()[1]
    victim_id = int(victim.removeprefix("broker-"))
    others = [f"broker-{b}" for b in (1, 2, 3) if b != victim_id]
    expected = {f"{victim}->{o}" for o in others} | {f"{o}->{victim}" for o in others}
    assert set(out.stdout.strip().split(" from brokers: cut on ")[1].split(", ")) == expected
    leader, _ = _state(pc, tp)
    started = time.monotonic()
    # A caught-up follower only falls behind while records come in (Kafka's rule).
    wait_until(
        lambda: produce(pc, leader, tp, b"x", acks=1) >= 0 and victim_id not in _isr(pc, tp),
        timeout_s=30,
        what=f"{victim} out of the ISR",
    )
    print(f"ISR shrink {time.monotonic() - started:.1f} s after the cut")
    assert pc.state.process(victim).pid > 0 and ProcessBackend(pc.dir).state(victim) == "running"
    out = pc.cli("cluster", "heal", victim)
    assert out.stdout.startswith(f"heal: {victim} (pid ")
    wait_until(lambda: victim_id in _isr(pc, tp), timeout_s=30, what=f"{victim} back in the ISR")
    events = pc.cli("events", "--json", "--event", "net_fault", "--event", "net_heal").stdout
    assert [json.loads(line)["event"] for line in events.splitlines()] == ["net_fault", "net_heal"]


def test_a_leader_cut_from_zookeeper_loses_leadership_but_no_acked_record(pc: Cluster) -> None:
    tp = create_topic(pc, "cut-leader")
    old, _ = _state(pc, tp)
    acked = {produce(pc, old, tp, b"before-%d" % i): b"before-%d" % i for i in range(5)}
    assert -1 not in acked
    backend = ProcessBackend(pc.dir)
    cut = backend.network_fault(NetworkFault("cut", f"broker-{old}", peers=("zookeeper",)))
    assert cut == [f"broker-{old}->zookeeper"]
    # Clients still reach the old leader and keep writing to it; whatever it acknowledges
    # must survive. Its session expires and the controller elects another leader.
    deadline = time.monotonic() + EXPIRY_WAIT_S
    for i in itertools.count():
        if _state(pc, tp)[0] != old:
            break
        assert time.monotonic() < deadline, "no new leader"
        offset = produce(pc, old, tp, b"during-%d" % i)
        if offset >= 0:
            acked[offset] = b"during-%d" % i
        time.sleep(0.02)
    new = _state(pc, tp)[0]
    assert new != old and not pc.zk.exists(BrokerIdZNode.path(old))
    # Once the new leader completes an acks=all write, the followers fetch from it: the old
    # leader, which clients still reach, cannot complete one any more.
    deadline = time.monotonic() + 30
    while (offset := produce(pc, new, tp, b"new-leader")) < 0:
        assert time.monotonic() < deadline, "the new leader completes no write"
    acked[offset] = b"new-leader"
    assert produce(pc, old, tp, b"late") == -1
    assert backend.heal_network(f"broker-{old}") == [f"broker-{old}->zookeeper"]
    wait_until(
        lambda: pc.zk.exists(BrokerIdZNode.path(old)),
        timeout_s=EXPIRY_WAIT_S,
        what="the old leader registered again",
    )
    wait_until(lambda: old in _isr(pc, tp), timeout_s=30, what="the old leader back in the ISR")
    hw = rpc.fetch(address(pc, new), tp, 0).high_watermark
    got = rpc.fetch(address(pc, new), tp, 0, max_bytes=1 << 22)
    present = dict(zip(got.offsets(), got.values(), strict=True))
    assert hw >= max(acked) + 1
    assert {o: present.get(o) for o in acked} == acked, "an acknowledged record was lost"


def test_a_broker_cut_from_everything_is_gone_until_healed(pc: Cluster) -> None:
    tp = create_topic(pc, "cut-all")
    leader, _ = _state(pc, tp)
    name = f"broker-{leader}"
    out = cli("cluster", "isolate", "leader", "--topic", tp.topic, "--dir", str(pc.dir))
    assert out.stdout.startswith(f"isolate: {name} (leader of {tp}, pid ")
    wait_until(
        lambda: _state(pc, tp)[0] != leader and not pc.zk.exists(BrokerIdZNode.path(leader)),
        timeout_s=EXPIRY_WAIT_S,
        what="a new leader and the old one unregistered",
    )
    with pytest.raises(grpc.RpcError) as failed:  # its client link stalls too
        rpc.stub(address(pc, leader)).Metadata(broker_pb2.MetadataRequest(), timeout=1)
    assert failed.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    faulted = [n for n, v in links(pc).items() if v["state"] != "ok"]
    assert len(faulted) == 11 and all(name in n for n in faulted)  # its Kafka clients' too
    assert cli("cluster", "heal", "--dir", str(pc.dir)).stdout.startswith("heal: every link: ")
    wait_until(lambda: leader in _isr(pc, tp), timeout_s=30, what=f"{name} back in the ISR")
