"""`Cluster`: a replicated cluster for an application's tests, as real local processes (a real
ZooKeeper, brokers, controllers; `minibroker cluster up`'s), started in seconds, broken by role
and watched through its event timeline.

    from minibroker.testing import Cluster, leader_of

    with Cluster(brokers=3, settings={"replica.lag.time.max.ms": 3000}) as cluster:
        cluster.create_topic("orders", partitions=3, replication_factor=3)
        producer = confluent_kafka.Producer(cluster.confluent_config(acks="all"))
        ...
        cluster.kill(leader_of("orders", 0))
        event = cluster.wait_for_new_leader("orders", 0)

Everything it starts is stopped, and its directory removed, when the block ends (also on an
exception); `keep=True` leaves both for inspection. `up()` and `down()` do the same without a
`with` block.
"""

from __future__ import annotations

import random
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

from minibroker import topology as t
from minibroker.chaos import ChaosBackend, ProcessBackend
from minibroker.client.admin_zk import create_topic as create_topic_in_zk
from minibroker.client.admin_zk import wait_for_leaders
from minibroker.faultproxy.model import LinkView
from minibroker.localcluster import ClusterError, ClusterState
from minibroker.runtime.zk_store import ZkStore
from minibroker.security.client_config import ClientSecurity
from minibroker.testing import faults, views, waits
from minibroker.testing.compose_deployment import ComposeDeployment
from minibroker.testing.deployment import Deployment, ProcessDeployment, setting_text
from minibroker.testing.faults import Action, Target
from minibroker.testing.roles import coordinator_of
from minibroker.testing.timeline import Event
from minibroker.testing.views import PartitionState


class Cluster:
    """A process-mode cluster (see the module docstring), or with `compose=True` the compose
    cluster (minibroker/testing/compose_deployment.py: deploy/docker-compose.yml's containers
    under compose project `project`, the same API). `settings` are Kafka's names
    (`replica.lag.time.max.ms`, `min.insync.replicas`, ...) over the `profile`'s timings
    ("demo": ZooKeeper session 6 s, replica lag 3 s; "kafka": Kafka's own defaults).
    `proxy=True` puts the fault proxy on every link, Kafka clients' included (network
    faults: isolate, delay, throttle); `kafka_port_base=9092` pins broker N's KAFKA port
    (what Kafka clients dial) at 9092 + N - 1 where a configuration needs fixed ports;
    `secure=True` starts the secure profile (SASL_SSL listeners, SCRAM-SHA-512) and the
    client configs carry the admin's credentials; while it is up, this process reads its
    ZooKeeper and brokers with the admin's login and certificate (one secure cluster at a
    time in a process)."""

    def __init__(
        self,
        *,
        brokers: int = 3,
        controllers: int = 2,
        profile: str = "demo",
        settings: Mapping[str, object] | None = None,
        proxy: bool = False,
        secure: bool = False,
        directory: str | Path | None = None,
        keep: bool = False,
        ready_timeout_s: float = 60.0,
        kafka_port_base: int | None = None,
        compose: bool = False,
        project: str | None = None,
        compose_file: str | Path | None = None,
    ) -> None:
        self.brokers = brokers
        self.controllers = controllers
        self.profile = profile
        self.settings = {k: setting_text(v) for k, v in (settings or {}).items()}
        self.proxy = proxy
        self.secure = secure
        self.keep = keep
        self.compose = compose
        self._deployment: Deployment
        if compose:
            _compose_refuses(brokers, controllers, proxy, directory, kafka_port_base)
            self._deployment = ComposeDeployment(
                profile=profile, settings=self.settings, secure=secure, keep=keep,
                ready_timeout_s=ready_timeout_s, project=project,
                compose_file=Path(compose_file) if compose_file is not None else None,
            )  # fmt: skip
        else:
            if project is not None or compose_file is not None:
                raise ClusterError("project= and compose_file= are compose=True's")
            self._deployment = ProcessDeployment(
                brokers=brokers, controllers=controllers, profile=profile,
                settings=self.settings, proxy=proxy, secure=secure,
                directory=Path(directory) if directory is not None else None, keep=keep,
                ready_timeout_s=ready_timeout_s, kafka_port_base=kafka_port_base,
            )  # fmt: skip
        self._zk: ZkStore | None = None
        self.started_ms = 0
        self.last_fault_ms = 0  # when the last fault was applied: the waits' default `since`

    # ---- life ----------------------------------------------------------------------------

    def up(self) -> Cluster:
        """Start every process (container) and wait until the brokers are registered and a
        controller is elected; ClusterError (saying what failed) otherwise."""
        if self._zk is not None:
            raise ClusterError("this cluster is already up")
        self.started_ms = int(time.time() * 1000)
        self._deployment.up()
        try:
            self._zk = ZkStore(self._deployment.zk_connect, session_timeout_ms=10_000)
            self._zk.start()
        except BaseException:
            self.down()
            raise
        self.last_fault_ms = self.started_ms
        return self

    def down(self) -> None:
        """Stop everything at once (a process-mode cluster: SIGKILL after SIGTERM, no
        controlled shutdown; compose: `down -v`) and remove what it made (its directory; its
        containers, network and volumes) unless `keep`. Safe to call twice."""
        if self._zk is not None:
            self._zk.stop()
            self._zk = None
        self._deployment.down()

    def __enter__(self) -> Cluster:
        return self.up()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.down()

    # ---- where it is -----------------------------------------------------------------------

    @property
    def deployment(self) -> Deployment:
        """Where it runs: processes (`.kind == "process"`) or containers (`"compose"`)."""
        return self._deployment

    @property
    def state(self) -> ClusterState:
        """A process-mode cluster's processes as recorded now (PIDs change when nodes
        restart)."""
        if not isinstance(self._deployment, ProcessDeployment):
            raise ClusterError("a compose cluster has no process state: see cluster.nodes")
        return self._deployment.state

    @property
    def directory(self) -> Path:
        """A process-mode cluster's directory: state file, each node's data, `logs/`."""
        return Path(self.state.dir)

    @property
    def zookeeper_connect(self) -> str:
        return self._deployment.zk_connect

    @property
    def nodes(self) -> list[str]:
        """Every node's name: zookeeper, broker-N, controller-N."""
        return [n.name for n in self._deployment.nodes()]

    @property
    def bootstrap_servers(self) -> str:
        """Every broker's KAFKA listener (Kafka's wire protocol), for any Kafka client."""
        return self._deployment.bootstrap_servers

    @property
    def grpc_bootstrap(self) -> str:
        """Every broker's gRPC address (minibroker's own Producer and Consumer)."""
        return ",".join(a for _, a in sorted(self._deployment.broker_addresses().items()))

    # ---- clients ---------------------------------------------------------------------------

    def _security(self) -> ClientSecurity:
        return self._deployment.security()

    def confluent_config(
        self, overrides: Mapping[str, Any] | None = None, **extra: Any
    ) -> dict[str, Any]:
        """confluent-kafka settings: bootstrap.servers (and security), then `overrides` by
        Kafka's names and `extra` with `_` for `.` (`acks="all"`, `group_id="g"`)."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        if self.secure:
            out.update(self._security().confluent())
        out.update(overrides or {})
        out.update({k.replace("_", "."): v for k, v in extra.items()})
        return out

    def kafka_python_config(self, **extra: Any) -> dict[str, Any]:
        """kafka-python keyword arguments: bootstrap_servers (and security), then `extra`."""
        out: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers.split(",")}
        if self.secure:
            out.update(self._security().kafka_python())
        out.update(extra)
        return out

    def aiokafka_config(self, **extra: Any) -> dict[str, Any]:
        """aiokafka keyword arguments (an ssl_context where the cluster is secure)."""
        out: dict[str, Any] = {"bootstrap_servers": self.bootstrap_servers}
        if self.secure:
            import ssl

            security = self._security()
            out.update(
                security_protocol=security.protocol,
                sasl_mechanism=security.mechanism,
                sasl_plain_username=security.username,
                sasl_plain_password=security.password,
                ssl_context=ssl.create_default_context(cafile=security.ca_file or None),
            )
        out.update(extra)
        return out

    # ---- topics and state ------------------------------------------------------------------

    @property
    def zk(self) -> ZkStore:
        if self._zk is None:
            raise ClusterError("the cluster is not up: use `with Cluster(...)` or up()")
        return self._zk

    def create_topic(
        self,
        name: str,
        partitions: int = 1,
        replication_factor: int = 3,
        *,
        min_insync_replicas: int | None = None,
        configs: Mapping[str, object] | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        """Create `name` as kafka-topics --create does and wait until every partition has a
        leader."""
        config = {k: setting_text(v) for k, v in (configs or {}).items()}
        if min_insync_replicas is not None:
            config["min.insync.replicas"] = str(min_insync_replicas)
        create_topic_in_zk(self.zk, name, partitions, replication_factor, config, random.Random())
        wait_for_leaders(self.zk, name, int(timeout_s * 1000))

    def partition(self, topic: str, partition: int = 0) -> PartitionState:
        """Leader, epoch, replicas and ISR from ZooKeeper; each replica's LEO and HW as its
        broker reports it (None where it did not answer: dead or paused)."""
        return views.partition_state(self._deployment.broker_addresses(), self.zk, topic, partition)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The leader's broker id (-1: none)."""
        state = self.zk.read_partition_state(views.tp(topic, partition))
        return -1 if state is None else state.leader

    def isr(self, topic: str, partition: int = 0) -> tuple[int, ...]:
        state = self.zk.read_partition_state(views.tp(topic, partition))
        return () if state is None else tuple(state.isr)

    def controller(self) -> int | None:
        """The active controller's id (101, 102, ...), None while there is none."""
        return self.zk.read_controller()

    def coordinator(self, *, group: str | None = None, transactional_id: str | None = None) -> int:
        """The broker id coordinating `group` (or `transactional_id`) now."""
        name, _ = coordinator_of(group=group, transactional_id=transactional_id).resolve(
            views.Reader(self.zk)
        )
        return int(name.removeprefix("broker-"))

    # ---- faults (minibroker/testing/faults.py) ----------------------------------------------

    def _backend(self) -> ChaosBackend:
        return self._deployment.backend()

    def _apply(self, action: str, target: Target | None, **kw: Any) -> Action:
        done = faults.apply(self._backend(), views.Reader(self.zk), action, target, **kw)
        self.last_fault_ms = done.at_ms
        return done

    def kill(self, target: Target) -> Action:
        """SIGKILL the node: its ZooKeeper session must expire (a crash)."""
        return self._apply("kill", target)

    def stop(self, target: Target) -> Action:
        """A clean shutdown (SIGTERM: a broker's controlled shutdown)."""
        return self._apply("stop", target)

    def pause(self, target: Target) -> Action:
        """SIGSTOP: the node keeps its sockets and does nothing (a stall, a GC pause)."""
        return self._apply("pause", target)

    def resume(self, target: Target) -> Action:
        return self._apply("resume", target)

    def start(self, target: Target) -> Action:
        """Start a killed or stopped node again with its data."""
        return self._apply("start", target)

    def restart(self, target: Target) -> Action:
        return self._apply("restart", target)

    def isolate(self, target: Target, *, peers: tuple[str, ...] = ()) -> Action:
        """Cut every link of the node (or only those to `peers`); needs proxy=True."""
        return self._apply("cut", target, peers=peers)

    def cut_from_zookeeper(self, target: Target) -> Action:
        """Cut only the node's links to ZooKeeper; needs proxy=True."""
        return self._apply("cut", target, peers=("zookeeper",))

    def delay(self, target: Target, delay_ms: int, *, peers: tuple[str, ...] = ()) -> Action:
        """Hold every byte on the node's links `delay_ms` each way; needs proxy=True."""
        return self._apply("delay", target, peers=peers, delay_ms=delay_ms)

    def throttle(self, target: Target, bytes_per_s: int, *, peers: tuple[str, ...] = ()) -> Action:
        """Cap each direction of the node's links; needs proxy=True."""
        return self._apply("throttle", target, peers=peers, bytes_per_s=bytes_per_s)

    def heal(self, target: Target | None = None) -> Action:
        """Undo the network faults of the node (of every link: None)."""
        return self._apply("heal", target)

    def links(self) -> list[LinkView]:
        """Every link of the fault proxy (`proxy=True`): its faults, connections and bytes."""
        backend = self._backend()
        if not isinstance(backend, ProcessBackend):
            raise ClusterError("a compose cluster has no fault proxy, hence no links to list")
        return backend.network_links()

    # ---- the timeline and waits (minibroker/testing/waits.py) --------------------------------

    def events(self, since: int | None = None, *kinds: str) -> list[Event]:
        """Every broker's and controller's events since `since` (epoch ms; default: the
        cluster's start), oldest first; only these `kinds` when given."""
        events = self._deployment.events(self.started_ms if since is None else since)
        return [e for e in events if e.kind in kinds] if kinds else events

    def wait_for_isr_shrink(
        self, topic: str, partition: int = 0, *, since: int | None = None, timeout_s: float = 30
    ) -> Event:
        """The first ISR shrink of the partition since `since` (default: the last fault). As
        in Kafka 2.6, a follower at the leader's LEO is never out of sync, however idle: a
        paused follower leaves the ISR once records arrive that it does not fetch (or, after
        zookeeper.session.timeout.ms, through the controller: `replica_removed_from_isr`)."""
        return waits.isr_change(self, "isr_shrink", topic, partition, since, timeout_s)

    def wait_for_isr_expand(
        self, topic: str, partition: int = 0, *, since: int | None = None, timeout_s: float = 30
    ) -> Event:
        return waits.isr_change(self, "isr_expand", topic, partition, since, timeout_s)

    def wait_for_new_leader(
        self, topic: str, partition: int = 0, *, since: int | None = None, timeout_s: float = 30
    ) -> Event:
        """The controller's first election of the partition's leader since `since` (default:
        the last fault) whose leader differs from the one before."""
        return waits.new_leader(self, topic, partition, since, timeout_s)

    def wait_for_controller_change(
        self, *, since: int | None = None, timeout_s: float = 30
    ) -> Event:
        return waits.controller_change(self, since, timeout_s)

    def wait_until_fully_replicated(
        self, *topics: str, timeout_s: float = 60
    ) -> dict[str, list[PartitionState]]:
        """Every partition (of `topics`, default all) led, with every replica in the ISR."""
        return waits.fully_replicated(self, topics, timeout_s)


def _compose_refuses(
    brokers: int,
    controllers: int,
    proxy: bool,
    directory: str | Path | None,
    kafka_port_base: int | None,
) -> None:
    """What compose=True cannot do, each refused with what to do instead."""
    shape = (t.DEFAULT_BROKERS, t.DEFAULT_CONTROLLERS)
    if (brokers, controllers) != shape:
        raise ClusterError(
            f"compose=True runs deploy/docker-compose.yml's {shape[0]} brokers and {shape[1]} "
            f"controllers, not {brokers} and {controllers}: use process mode for another shape"
        )
    if proxy:
        raise ClusterError(
            "compose=True makes network faults inside the containers (isolate, "
            "cut_from_zookeeper) and has no fault proxy: drop proxy=True"
        )
    if directory is not None:
        raise ClusterError("compose=True keeps its data in Docker volumes: drop directory=")
    if kafka_port_base not in (None, t.KAFKA_EXTERNAL_PORT_BASE + 1):
        raise ClusterError(
            f"compose=True publishes the Kafka ports {t.bootstrap_kafka_external()}: "
            "drop kafka_port_base="
        )
