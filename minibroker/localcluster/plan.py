"""What `cluster up` will start: free ports, each node's command line and settings (from
minibroker/topology.py), and the fault proxy's links when asked for."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from minibroker import topology
from minibroker.faultproxy.model import LinkSpec
from minibroker.localcluster import secure as secure_mode
from minibroker.localcluster.ports import free_ports
from minibroker.localcluster.state import (
    CONTROLLER_ID_BASE,
    DASHBOARD,
    FAULT_PROXY,
    HOST,
    LINKS_FILE,
    ClusterError,
    ClusterState,
    ProcessInfo,
)
from minibroker.runtime import zk_server
from minibroker.runtime.settings import Settings


def _program_cmd(
    program: str, node_args: list[str], state: ClusterState, zk_connect: str = ""
) -> list[str]:
    cmd = [sys.executable, "-m", program, *node_args, "--zk", zk_connect or state.zk_connect]
    cmd += ["--profile", state.profile]
    for o in state.overrides:
        cmd += ["--set", o]
    return cmd


def plan(
    cluster_dir: Path,
    *,
    brokers: int,
    controllers: int,
    overrides: Sequence[str],
    profile: str,
    zk_port: int | None,
    broker_port_base: int | None,
    proxy: bool = False,
    dashboard_port: int | None = None,
    secure: bool = False,
    kafka_port_base: int | None = None,
) -> ClusterState:
    """The processes of a cluster, their ports, dirs and command lines (nothing started).
    With `proxy`, a fault proxy carries every link (topology.proxied_settings): a broker's
    recorded port is then the proxy's port of its client link, what clients use, and its KAFKA
    port the proxy's port of its Kafka-client link. `broker_port_base` and `kafka_port_base`
    pin broker N's gRPC and KAFKA ports (what clients dial) at base + N - 1."""
    if brokers < 1 or controllers < 1:
        raise ClusterError("a cluster needs at least one broker and one controller")
    if brokers >= CONTROLLER_ID_BASE:
        raise ClusterError(
            f"at most {CONTROLLER_ID_BASE - 1} brokers (controller ids start at 101)"
        )
    Settings.load(profile=profile, overrides=overrides)  # validate before starting anything
    d = cluster_dir.resolve()
    all_nodes = topology.nodes(brokers, controllers)
    links = topology.proxy_links(all_nodes) if proxy else []
    listeners = sum(len(topology.node_listeners(n, all_nodes)) for n in all_nodes) if proxy else 0
    if secure and proxy:
        raise ClusterError("--secure and --proxy cannot be combined yet")
    count = 2 + 2 * (brokers + controllers) + brokers * (3 if secure else 1)
    count += len(links) + listeners
    free = iter(free_ports(count))
    zk_port = zk_port or next(free)
    state = ClusterState(dir=str(d), zk_connect=f"{HOST}:{zk_port}", profile=profile, secure=secure)
    state.overrides = list(overrides)
    install = zk_server.find_zookeeper()
    zk_dir = d / "zookeeper"
    zk_cfg = zk_dir / "zoo.cfg"
    state.processes.append(
        ProcessInfo(
            name="zookeeper",
            role="zookeeper",
            id=None,
            host=HOST,
            port=zk_port,
            data_dir=str(zk_dir),
            log_file=str(d / "logs" / "zookeeper.log"),
            cmd=zk_server.command(install, zk_cfg, d / "logs"),
        )
    )

    link_ports: dict[tuple[str, str], int] = {}
    if proxy:
        link_ports = _plan_fault_proxy(state, links, free, broker_port_base, kafka_port_base)
    # (source, target) -> the port the proxy forwards that link to: the target's listener
    # for that source, or ZooKeeper's client port.
    targets = {(src, dst): zk_port for src, dst in links if dst == topology.ZOOKEEPER}

    # Names, ids and arguments come from the topology shared with deploy/docker-compose.yml;
    # only the ports (free ones) and the loopback listeners are this mode's own.
    for node in all_nodes:
        port, metrics_port, kafka_port, settings = _node_settings(
            node, all_nodes, free, (broker_port_base, kafka_port_base), link_ports, targets
        )
        if node.role == "broker" and brokers < OFFSETS_REPLICATION_FACTOR:
            # As Kafka's single-broker configs do: __consumer_offsets needs that many brokers.
            settings["offsets.topic.replication.factor"] = str(brokers)
            settings["transaction.state.log.replication.factor"] = str(brokers)
            settings["transaction.state.log.min.isr"] = str(min(brokers, 2))
        kafka_tls_port = token_port = 0
        if secure:
            settings.update(secure_mode.node_settings(d, node))
        if secure and node.role == "broker":
            kafka_tls_port, token_port = next(free), next(free)
            settings.update(
                secure_mode.broker_settings(
                    d, node, settings[node.listeners_setting], HOST, (kafka_tls_port, token_port)
                )
            )
        zk_connect = settings.get("zookeeper.connect", "")  # proxied: the node's own link
        args = topology.node_args(node, str(d / node.name / "data"), settings)
        if token_port:
            args += ["--config", str(secure_mode.broker_secrets(d))]
        state.processes.append(
            ProcessInfo(
                metrics_port=metrics_port,
                kafka_port=kafka_port,
                kafka_tls_port=kafka_tls_port,
                token_port=token_port,
                name=node.name,
                role=node.role,
                id=node.node_id,
                host=HOST,
                port=port,
                data_dir=str(d / node.name),
                log_file=str(d / "logs" / f"{node.name}.log"),
                cmd=_program_cmd(node.program, args, state, zk_connect),
            )
        )
    state.proxy_links = [
        LinkSpec(src, dst, link_ports[(src, dst)], targets[(src, dst)]).to_json()
        for src, dst in links
    ]
    if dashboard_port is not None:
        state.processes.append(_dashboard(d, dashboard_port))
    return state


def _dashboard(d: Path, port: int) -> ProcessInfo:
    """The live dashboard of this cluster (`minibroker dashboard --dir D`), started last."""
    cmd = [sys.executable, "-m", "minibroker.cli.main", DASHBOARD, "--dir", str(d)]
    return ProcessInfo(
        name=DASHBOARD,
        role=DASHBOARD,
        id=None,
        host=HOST,
        port=port,
        data_dir=str(d / DASHBOARD),
        log_file=str(d / "logs" / f"{DASHBOARD}.log"),
        cmd=[*cmd, "--port", str(port)],
    )


OFFSETS_REPLICATION_FACTOR = 3  # Kafka's offsets.topic.replication.factor


def _node_settings(
    node: topology.Node,
    all_nodes: list[topology.Node],
    free: Iterator[int],
    bases: tuple[int | None, int | None],
    link_ports: dict[tuple[str, str], int],
    targets: dict[tuple[str, str], int],
) -> tuple[int, int, int, dict[str, str]]:
    """A node's recorded port, metrics port, Kafka-protocol port (brokers; 0 = none) and
    deployment settings: a PLAINTEXT listener (and a broker's KAFKA one), or with the proxy
    (`link_ports`) one listener per source, each recorded in `targets` as where the proxy
    forwards that source's link. `bases`: the pinned gRPC and KAFKA port bases of brokers."""
    broker_port_base, kafka_port_base = bases
    if not link_ports:
        port = next(free)
        if node.role == "broker" and broker_port_base:
            port = broker_port_base + node.index - 1
        metrics_port = next(free)
        kafka_port = next(free) if node.role == "broker" else 0
        if kafka_port and kafka_port_base:
            kafka_port = kafka_port_base + node.index - 1
        settings = topology.process_settings(node, HOST, port, metrics_port, kafka_port)
        return port, metrics_port, kafka_port, settings
    metrics_port = next(free)
    own = topology.node_listeners(node, all_nodes)
    listen = {listener: next(free) for listener, _ in own}
    targets.update({(src, node.name): listen[n] for n, src in own if src is not None})
    settings = topology.proxied_settings(node, all_nodes, HOST, listen, link_ports, metrics_port)
    kafka_port = link_ports.get((topology.KAFKA_CLIENT_SOURCE, node.name), 0)
    return link_ports[(topology.CLIENT_SOURCE, node.name)], metrics_port, kafka_port, settings


def _plan_fault_proxy(
    state: ClusterState,
    links: list[tuple[str, str]],
    free: Iterator[int],
    broker_port_base: int | None,
    kafka_port_base: int | None,
) -> dict[tuple[str, str], int]:
    """Add the fault proxy's process to `state`; the proxy's port of every link. The pinned
    broker ports (--broker-port-base, --kafka-port-base) are those of the client links and
    the Kafka-client links: what clients dial."""
    d = Path(state.dir)
    control_port = next(free)
    proxy_dir = d / FAULT_PROXY
    cmd = [sys.executable, "-m", "minibroker.faultproxy", "--links", str(proxy_dir / LINKS_FILE)]
    state.processes.append(
        ProcessInfo(
            name=FAULT_PROXY,
            role=FAULT_PROXY,
            id=None,
            host=HOST,
            port=control_port,
            data_dir=str(proxy_dir),
            log_file=str(d / "logs" / f"{FAULT_PROXY}.log"),
            cmd=[*cmd, "--port", str(control_port), "--name", FAULT_PROXY],
        )
    )
    ports = {}
    pinned = {
        topology.CLIENT_SOURCE: broker_port_base,
        topology.KAFKA_CLIENT_SOURCE: kafka_port_base,
    }
    for src, dst in links:
        base = pinned.get(src)
        if base and dst.startswith("broker-"):
            ports[(src, dst)] = base + int(dst.removeprefix("broker-")) - 1
        else:
            ports[(src, dst)] = next(free)
    return ports
