"""The one description of the default cluster: node names and ids, ports, settings and program
arguments. The process-mode cluster (localcluster) and deploy/docker-compose.yml
(scripts/gen_compose.py) are both made from it, so they cannot drift. Pure data, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

Role = Literal["broker", "controller"]

# Controller ids are their own id space, written as /controller's "brokerid" (design §1).
CONTROLLER_ID_BASE = 100
DEFAULT_BROKERS = 3
DEFAULT_CONTROLLERS = 2

ZOOKEEPER = "zookeeper"
ZOOKEEPER_PORT = 2181
# The live dashboard's web port: `minibroker dashboard`, `cluster up --dashboard`, the demo and
# the compose service (published on the host's 127.0.0.1).
DASHBOARD_PORT = 8090
# In containers every node listens on two listeners: INTERNAL (container network, fixed
# port, used between nodes) and EXTERNAL (published on the host's loopback). The EXTERNAL
# port inside the container equals the published one because it is advertised as
# 127.0.0.1:<port>, which must work from the host. Ports end in the node id.
BROKER_INTERNAL_PORT = 9091
CONTROLLER_INTERNAL_PORT = 9190
EXTERNAL_PORT_BASE = 19000
METRICS_PORT_BASE = 29000
INTERNAL = "INTERNAL"
EXTERNAL = "EXTERNAL"
# Brokers also speak Kafka's wire protocol (broker/kafka): KAFKA_INTERNAL for containers, on a
# fixed port (29092, as Confluent's images name their internal listener), and KAFKA_EXTERNAL
# published on the host at 9091 + broker id, so that broker-1 is Kafka's familiar
# 127.0.0.1:9092 (which is why the brokers' gRPC INTERNAL port is 9091, not 9092).
KAFKA_INTERNAL = "KAFKA_INTERNAL"
KAFKA_EXTERNAL = "KAFKA_EXTERNAL"
BROKER_KAFKA_INTERNAL_PORT = 29092
KAFKA_EXTERNAL_PORT_BASE = 9091
# A container's data volume; the broker's log.dirs is a directory inside it.
CONTAINER_DATA_DIR = "/var/lib/minibroker"
CONTAINER_LOG_DIR = f"{CONTAINER_DATA_DIR}/logs"

# Labels every compose service carries; minibroker/chaos finds containers by them.
# The images deploy/docker-compose.yml runs (deploy/Dockerfile's targets).
RUNTIME_IMAGE = "minibroker:dev"
LOADGEN_IMAGE = "minibroker-loadgen:dev"
ZOOKEEPER_IMAGE = "minibroker-zookeeper:dev"
NETFAULT_IMAGE = "minibroker-netfault:dev"
ROLE_LABEL = "minibroker.role"
NODE_ID_LABEL = "minibroker.node-id"

BROKER_HEALTH_SERVICE = "minibroker.v1.Broker"
CONTROL_HEALTH_SERVICE = "minibroker.v1.Control"

# Environment variables the programs read, and who reads them. The compose file sets no
# other on our images, and each name must occur in the code (tests check both).
ENVIRONMENT: Mapping[str, str] = {
    "MINIBROKER_ZK": "ZooKeeper connect string: broker, controller and client commands",
    "MINIBROKER_PROFILE": "timing profile of broker and controller (demo or kafka)",
    "MINIBROKER_SETTINGS": "name=value settings with Kafka's names for brokers and controllers",
    "MINIBROKER_BOOTSTRAP": "brokers for client commands and the load generator",
    "MINIBROKER_LISTENER": "the listener clients pick from registrations found in ZooKeeper",
    "SPARK_LOCAL_IP": "the address the load generator's Spark driver binds (loadgen/spark.py)",
    "MINIBROKER_ZK_JAAS": "a JAAS file whose Client section is the tools' ZooKeeper login",
    "MINIBROKER_TLS_CA": "the CA certificate tools trust on the brokers' gRPC TLS listeners",
    "MINIBROKER_TLS_CERT": "a PEM (key and certificate) tools dial gRPC TLS listeners with",
    "MINIBROKER_SECURE_DIR": "where the compose secure profile copies the host's security files",
    "MINIBROKER_COMPOSE_FILE": "the compose file Cluster(compose=True) runs outside a checkout",
    # A prefix: MINIBROKER_HOST_BROKER_1, ... (host_variable), read by `docker stack deploy`.
    "MINIBROKER_HOST_": "a swarm node's machine address, advertised to clients outside it",
    "MINIBROKER_SWARM_ENGINES": "each swarm node's Docker engine, for faults on its tasks",
    "MINIBROKER_SWARM_LAB": "the swarm lab `minibroker swarm lab` acts on (its prefix)",
}


def host_variable(node_name: str) -> str:
    """The variable deploy/stack.yml advertises a node's machine address by (broker-1 ->
    MINIBROKER_HOST_BROKER_1): clients outside the swarm dial it."""
    return "MINIBROKER_HOST_" + node_name.upper().replace("-", "_")


# Settings that say where a node listens, what it advertises and where it stores data. Every
# other setting of a node must resolve the same in each deployment (tests compare them).
DEPLOYMENT_SETTINGS = frozenset(
    {
        "zookeeper.connect",
        "log.dirs",
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "inter.broker.listener.name",
        "minibroker.controller.listeners",
        "minibroker.controller.advertised.listeners",
        "minibroker.metrics.host",
        "minibroker.metrics.port",
    }
)


@dataclass(frozen=True)
class Node:
    """`broker-N` (broker id N) or `controller-N` (controller id 100+N)."""

    role: Role
    index: int

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"

    @property
    def node_id(self) -> int:
        return self.index if self.role == "broker" else CONTROLLER_ID_BASE + self.index

    @property
    def program(self) -> str:
        """The module run as `python -m <program>`."""
        return self.role

    @property
    def internal_port(self) -> int:
        return BROKER_INTERNAL_PORT if self.role == "broker" else CONTROLLER_INTERNAL_PORT

    @property
    def external_port(self) -> int:
        return EXTERNAL_PORT_BASE + self.node_id

    @property
    def kafka_external_port(self) -> int:
        """A broker's published Kafka-protocol port (0 for a controller: none)."""
        return KAFKA_EXTERNAL_PORT_BASE + self.node_id if self.role == "broker" else 0

    @property
    def metrics_port(self) -> int:
        return METRICS_PORT_BASE + self.node_id

    @property
    def health_service(self) -> str:
        """The gRPC health service that is SERVING once the node can do its job: a broker
        registered in ZooKeeper; a controller connected (active or standby)."""
        return BROKER_HEALTH_SERVICE if self.role == "broker" else ""

    @property
    def labels(self) -> dict[str, str]:
        return {ROLE_LABEL: self.role, NODE_ID_LABEL: str(self.node_id)}

    @property
    def listeners_setting(self) -> str:
        return "listeners" if self.role == "broker" else "minibroker.controller.listeners"

    @property
    def advertised_setting(self) -> str:
        return (
            "advertised.listeners"
            if self.role == "broker"
            else "minibroker.controller.advertised.listeners"
        )


def nodes(brokers: int = DEFAULT_BROKERS, controllers: int = DEFAULT_CONTROLLERS) -> list[Node]:
    """Brokers first, then controllers, in index order."""
    return [Node("broker", n) for n in range(1, brokers + 1)] + [
        Node("controller", n) for n in range(1, controllers + 1)
    ]


def process_settings(
    node: Node, host: str, port: int, metrics_port: int, kafka_port: int = 0
) -> dict[str, str]:
    """A local process: one PLAINTEXT (gRPC) listener on `host:port`, a broker's KAFKA
    listener (Kafka's wire protocol) on `kafka_port` when given, metrics on loopback."""
    listeners = f"PLAINTEXT://{host}:{port}"
    if kafka_port and node.role == "broker":
        listeners += f",KAFKA://{host}:{kafka_port}"
    return {node.listeners_setting: listeners, "minibroker.metrics.port": str(metrics_port)}


# With the fault proxy (`cluster up --proxy`) every connection between processes goes through
# one link of the proxy, named "<source>-><target>", and Kafka's named listeners tell each
# process which link to use: a node listens once per peer that connects to it (CLIENT for
# tools and clients, B<id> per broker, C<id> per controller) and advertises, for each, the
# proxy's port of the link peer -> node. A process connects to others on its own listener
# name (its inter.broker.listener.name), so it always dials its own links.
CLIENT_LISTENER = "CLIENT"
CLIENT_SOURCE = "client"
# A broker's KAFKA listener (Kafka's wire protocol) for Kafka clients, through its own link.
KAFKA_LISTENER = "KAFKA"
KAFKA_CLIENT_SOURCE = "kafka-client"


def source_listener(node: Node) -> str:
    """The listener name other nodes serve `node` on: B<broker id> or C<controller id>."""
    return f"{'B' if node.role == 'broker' else 'C'}{node.node_id}"


def node_listeners(node: Node, all_nodes: Sequence[Node]) -> list[tuple[str, str | None]]:
    """(listener, the peer that connects through it) of a proxied node, CLIENT first (tools
    take the first advertised endpoint), then a broker's KAFKA listener (Kafka clients, on
    their own links). A broker's own B<id> has no peer: Kafka wants the inter-broker listener
    among a broker's listeners, but nobody dials itself."""
    out: list[tuple[str, str | None]] = [(CLIENT_LISTENER, CLIENT_SOURCE)]
    if node.role == "broker":
        out.append((KAFKA_LISTENER, KAFKA_CLIENT_SOURCE))
    for peer in all_nodes:
        if peer.role == "broker" or node.role == "broker":  # controllers never talk
            out.append((source_listener(peer), None if peer == node else peer.name))
    return out


def proxy_links(all_nodes: Sequence[Node]) -> list[tuple[str, str]]:
    """(source, target) of every link: each node to ZooKeeper, and each peer (and clients)
    to each node they connect to."""
    links = [(n.name, ZOOKEEPER) for n in all_nodes]
    for node in all_nodes:
        links += [(src, node.name) for _, src in node_listeners(node, all_nodes) if src]
    return links


def proxied_settings(
    node: Node,
    all_nodes: Sequence[Node],
    host: str,
    listen_ports: Mapping[str, int],
    link_ports: Mapping[tuple[str, str], int],
    metrics_port: int,
) -> dict[str, str]:
    """A local process behind the fault proxy: one listener per peer on `listen_ports` (by
    listener name), each advertised at the proxy's port of its link (`link_ports`, by
    (source, target)); ZooKeeper through the node's own link to it."""
    own = node_listeners(node, all_nodes)

    def advertised(listener: str, source: str | None) -> str:
        port = listen_ports[listener] if source is None else link_ports[(source, node.name)]
        return f"{listener}://{host}:{port}"

    return {
        node.listeners_setting: ",".join(f"{n}://{host}:{listen_ports[n]}" for n, _ in own),
        node.advertised_setting: ",".join(advertised(n, src) for n, src in own),
        "listener.security.protocol.map": ",".join(
            f"{n}:PLAINTEXT"
            for n in [CLIENT_LISTENER, KAFKA_LISTENER, *(source_listener(p) for p in all_nodes)]
        ),
        "inter.broker.listener.name": source_listener(node),
        "zookeeper.connect": f"{host}:{link_ports[(node.name, ZOOKEEPER)]}",
        "minibroker.metrics.port": str(metrics_port),
    }


def container_settings(node: Node, external_host: str = "127.0.0.1") -> dict[str, str]:
    """A container: INTERNAL for the other nodes, EXTERNAL published to the host (at
    `external_host`: the host's loopback for compose, the node machine's address in a swarm).
    EXTERNAL is advertised first because host-side tools take the first endpoint of a
    registration."""
    internal, external = node.internal_port, node.external_port
    listeners = f"{INTERNAL}://0.0.0.0:{internal},{EXTERNAL}://0.0.0.0:{external}"
    advertised = f"{EXTERNAL}://{external_host}:{external},{INTERNAL}://{node.name}:{internal}"
    names = [INTERNAL, EXTERNAL]
    if node.role == "broker":
        kafka_internal, kafka_external = BROKER_KAFKA_INTERNAL_PORT, node.kafka_external_port
        listeners += (
            f",{KAFKA_INTERNAL}://0.0.0.0:{kafka_internal},"
            f"{KAFKA_EXTERNAL}://0.0.0.0:{kafka_external}"
        )
        advertised += (
            f",{KAFKA_EXTERNAL}://{external_host}:{kafka_external},"
            f"{KAFKA_INTERNAL}://{node.name}:{kafka_internal}"
        )
        names += [KAFKA_INTERNAL, KAFKA_EXTERNAL]
    return {
        node.listeners_setting: listeners,
        node.advertised_setting: advertised,
        "listener.security.protocol.map": ",".join(f"{n}:PLAINTEXT" for n in names),
        "inter.broker.listener.name": INTERNAL,
        # Published ports reach a container's own address, never its loopback.
        "minibroker.metrics.host": "0.0.0.0",
        "minibroker.metrics.port": str(node.metrics_port),
    }


def node_args(node: Node, log_dir: str, settings: Mapping[str, str]) -> list[str]:
    """The program arguments of one node after `python -m <program>`: its name, id, log dir
    (brokers) and deployment settings. The same function serves both deployments."""
    args = ["--name", node.name, "--id", str(node.node_id)]
    if node.role == "broker":
        args += ["--log-dir", log_dir]
    for name, value in settings.items():
        args += ["--set", f"{name}={value}"]
    return args


def container_command(
    node: Node, external_host: str = "127.0.0.1", extra: Mapping[str, str] | None = None
) -> list[str]:
    """The full command of a node's container (ZooKeeper and profile come from the env)."""
    settings = container_settings(node, external_host) | dict(extra or {})
    args = node_args(node, CONTAINER_LOG_DIR, settings)
    return ["python", "-m", node.program, *args]


def container_environment() -> dict[str, str]:
    """What every broker and controller container gets; the profile is one host variable."""
    return {
        "MINIBROKER_ZK": f"{ZOOKEEPER}:{ZOOKEEPER_PORT}",
        "MINIBROKER_PROFILE": "${MINIBROKER_PROFILE:-demo}",
        "MINIBROKER_SETTINGS": "${MINIBROKER_SETTINGS:-}",
    }


def published_ports(node: Node) -> list[int]:
    """Host ports of a node, each equal to its container port, bound to 127.0.0.1."""
    kafka = [node.kafka_external_port] if node.kafka_external_port else []
    return [node.external_port, *kafka, node.metrics_port]


def bootstrap_internal(brokers: int = DEFAULT_BROKERS) -> str:
    """Every broker's INTERNAL address: how containers reach the cluster."""
    return ",".join(f"{n.name}:{n.internal_port}" for n in nodes(brokers, 0))


def bootstrap_external(brokers: int = DEFAULT_BROKERS) -> str:
    """Every broker's published address: how the host reaches the cluster."""
    return ",".join(f"127.0.0.1:{n.external_port}" for n in nodes(brokers, 0))


def bootstrap_kafka_external(brokers: int = DEFAULT_BROKERS) -> str:
    """Every broker's published KAFKA_EXTERNAL address: Kafka clients on the host."""
    return ",".join(f"127.0.0.1:{n.kafka_external_port}" for n in nodes(brokers, 0))


def bootstrap_kafka_internal(brokers: int = DEFAULT_BROKERS) -> str:
    """Every broker's KAFKA_INTERNAL address: Kafka clients in containers."""
    return ",".join(f"{n.name}:{BROKER_KAFKA_INTERNAL_PORT}" for n in nodes(brokers, 0))
