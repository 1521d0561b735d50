"""Finding out what runs: a ZooKeeper session to the cluster, and `status` (processes, the
active controller, registered brokers) read from the state file and ZooKeeper."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from minibroker.core.zk_layout import BrokerIdsZNode, BrokerIdZNode
from minibroker.localcluster.processes import process_state
from minibroker.localcluster.state import ClusterState
from minibroker.runtime.zk_store import ZkError, ZkNoNode, ZkStore


@contextlib.contextmanager
def zk_session(zk_connect: str, timeout_ms: int = 5000) -> Iterator[ZkStore]:
    store = ZkStore(zk_connect, session_timeout_ms=timeout_ms, connection_timeout_ms=timeout_ms)
    store.start()
    try:
        yield store
    finally:
        store.stop()


def _children_or_empty(zk: ZkStore, path: str) -> list[str]:
    try:
        return zk.children(path)
    except ZkNoNode:
        return []


@dataclass
class ClusterStatus:
    state: ClusterState
    process_states: dict[str, str]
    zk_reachable: bool
    controller_id: int | None = None
    controller_epoch: int | None = None
    registered: dict[int, int] = field(default_factory=dict)  # broker id -> broker epoch

    @property
    def controller_name(self) -> str | None:
        for p in self.state.by_role("controller"):
            if p.id == self.controller_id:
                return p.name
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "dir": self.state.dir,
            "zookeeper_connect": self.state.zk_connect,
            "profile": self.state.profile,
            "zookeeper_reachable": self.zk_reachable,
            "controller": {
                "id": self.controller_id,
                "name": self.controller_name,
                "epoch": self.controller_epoch,
            },
            "registered_brokers": {str(k): {"broker_epoch": v} for k, v in self.registered.items()},
            "secure": self.state.secure,
            # `up --secure`: the admin's Kafka client settings (SASL_SSL, SCRAM-SHA-512).
            "admin_client_config": self.state.admin_client_config,
            "processes": [
                {
                    "name": p.name,
                    "role": p.role,
                    "id": p.id,
                    "pid": p.pid,
                    "address": p.address,
                    "data_dir": p.data_dir,
                    "log_file": p.log_file,
                    "metrics": f"http://{p.host}:{p.metrics_port}/metrics"
                    if p.metrics_port
                    else None,
                    # A broker's KAFKA listener: bootstrap for unmodified Kafka clients.
                    "kafka_port": p.kafka_port or None,
                    "kafka_tls_port": p.kafka_tls_port or None,
                    # gRPC with a SCRAM login's token instead of a client certificate.
                    "token_port": p.token_port or None,
                    "state": self.process_states[p.name],
                    "alive": self.process_states[p.name] != "dead",
                }
                for p in self.state.processes
            ],
        }


def status(state: ClusterState) -> ClusterStatus:
    st = ClusterStatus(
        state=state,
        process_states={p.name: process_state(p) for p in state.processes},
        zk_reachable=False,
    )
    if st.process_states.get("zookeeper") != "running":
        return st
    try:
        with zk_session(state.zk_connect, timeout_ms=2000) as zk:
            st.zk_reachable = True
            st.controller_id = zk.read_controller()
            epoch = zk.read_controller_epoch()
            st.controller_epoch = epoch[0] if epoch else None
            for child in _children_or_empty(zk, BrokerIdsZNode.path):
                stat = zk.exists(BrokerIdZNode.path(int(child)))
                if stat is not None:
                    st.registered[int(child)] = stat.czxid
    except ZkError:
        st.zk_reachable = False
    return st
