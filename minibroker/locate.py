"""How client-side tools find the cluster: --zk, --bootstrap, --dir, or the environment (the
command lines' flags are in minibroker/cli/locate.py).

ZooKeeper (`zk_connect`): --zk, then --bootstrap (ask that broker for its zookeeper.connect),
then an explicit --dir; then $MINIBROKER_ZK, $MINIBROKER_BOOTSTRAP; then the default cluster dir.
Brokers (`bootstrap_servers`): --bootstrap, then --zk (the registrations under /brokers/ids),
then an explicit --dir; then $MINIBROKER_BOOTSTRAP, $MINIBROKER_ZK; then the default cluster dir.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Protocol

from minibroker.client.admin import BrokerUnreachable, describe_broker
from minibroker.client.channels import parse_bootstrap
from minibroker.client.events import Source
from minibroker.core.listeners import from_strings, pick, pick_kafka
from minibroker.core.zk_layout import (
    BrokerIdsZNode,
    BrokerIdZNode,
    BrokerRegistration,
    ControllerEndpointZNode,
    ZNodeFormatError,
)
from minibroker.localcluster import DEFAULT_DIR, STATE_FILE, ClusterError, ClusterState, zk_session
from minibroker.localcluster.state import TOKEN_LISTENER
from minibroker.runtime.zk_store import ZkNoNode


class LocateArgs(Protocol):
    """The flags that say where the cluster is (argparse's Namespace has them)."""

    zk: str | None
    bootstrap: str | None
    dir: Path | None


def default_dir() -> Path:
    return Path(os.environ.get("MINIBROKER_DIR") or DEFAULT_DIR)


def cluster_dir(args: LocateArgs) -> Path:
    return args.dir if args.dir is not None else default_dir()


def _from_bootstrap(address: str) -> str:
    try:
        return describe_broker(address).zookeeper_connect
    except BrokerUnreachable as exc:
        raise ClusterError(f"cannot reach the cluster through --bootstrap: {exc}") from None


def zk_connect(args: LocateArgs) -> str:
    if args.zk:
        return str(args.zk)
    if args.bootstrap:
        return _from_bootstrap(args.bootstrap)
    if args.dir is not None:
        return ClusterState.load(args.dir).zk_connect
    if os.environ.get("MINIBROKER_ZK"):
        return os.environ["MINIBROKER_ZK"]
    if os.environ.get("MINIBROKER_BOOTSTRAP"):
        return _from_bootstrap(os.environ["MINIBROKER_BOOTSTRAP"])
    if (default_dir() / STATE_FILE).exists():
        return ClusterState.load(default_dir()).zk_connect
    raise ClusterError(
        "cannot find the cluster: give --zk HOST:PORT, --bootstrap HOST:PORT or --dir DIR "
        "(or set MINIBROKER_ZK / MINIBROKER_BOOTSTRAP)"
    )


def _bootstrap_list(value: str, source: str) -> list[str]:
    try:
        return parse_bootstrap(value)
    except ValueError as exc:
        raise ClusterError(f"bad {source}: {exc}") from None


def client_listener() -> str:
    """The listener whose endpoints tools use when they find brokers and controllers through
    ZooKeeper: $MINIBROKER_LISTENER, else PLAINTEXT or the first advertised (a compose
    cluster advertises its host-reachable EXTERNAL listener first)."""
    return os.environ.get("MINIBROKER_LISTENER", "")


def registered_address(reg: BrokerRegistration) -> str | None:
    """host:port to reach a registered broker over gRPC, or None if it names no endpoint."""
    endpoint = pick(from_strings(reg.endpoints), client_listener())
    return None if endpoint is None else endpoint.address


def registrations_in_zookeeper(zk_connect_string: str) -> list[BrokerRegistration]:
    """Every readable registration under /brokers/ids, by broker id."""
    found = []
    with zk_session(zk_connect_string) as zk:
        try:
            ids = sorted(int(c) for c in zk.children(BrokerIdsZNode.path) if c.isdigit())
        except ZkNoNode:
            ids = []
        for broker_id in ids:
            try:
                data, _ = zk.get(BrokerIdZNode.path(broker_id))
                found.append(BrokerIdZNode.decode(broker_id, data))
            except (ZkNoNode, ZNodeFormatError):
                continue  # went away meanwhile, or not a registration we can read
    return found


def brokers_in_zookeeper(zk_connect_string: str) -> list[str]:
    """host:port of every broker registered under /brokers/ids, by broker id."""
    addresses = [
        a for a in map(registered_address, registrations_in_zookeeper(zk_connect_string)) if a
    ]
    if not addresses:
        raise ClusterError(f"no broker is registered in ZooKeeper at {zk_connect_string}")
    return addresses


def kafka_brokers_in_zookeeper(zk_connect_string: str, listener: str = "") -> list[str]:
    """host:port of every registered broker's Kafka-protocol listener (for Kafka clients: the
    one named `listener`, else the one beside $MINIBROKER_LISTENER, e.g. KAFKA_INTERNAL in
    containers), by broker id."""
    listener = listener or client_listener()
    endpoints = (
        pick_kafka(from_strings(reg.endpoints), listener)
        for reg in registrations_in_zookeeper(zk_connect_string)
    )
    addresses = [e.address for e in endpoints if e is not None]
    if not addresses:
        raise ClusterError(
            f"no broker registered in ZooKeeper at {zk_connect_string} has a KAFKA listener"
        )
    return addresses


def brokers_in_dir(path: Path) -> list[str]:
    brokers = ClusterState.load(path).by_role("broker")
    if client_listener() == TOKEN_LISTENER:  # a token login: the certificate-less listener
        addresses = [f"{p.host}:{p.token_port}" for p in brokers if p.token_port]
    else:
        addresses = [p.address for p in brokers]
    if not addresses:
        raise ClusterError(f"the cluster in {path} has no brokers")
    return addresses


def bootstrap_servers(args: LocateArgs) -> list[str]:
    """Broker addresses for the producer and consumer (see the module docstring for order)."""
    if args.bootstrap:
        return _bootstrap_list(str(args.bootstrap), "--bootstrap")
    if args.zk:
        return brokers_in_zookeeper(str(args.zk))
    if args.dir is not None:
        return brokers_in_dir(args.dir)
    if os.environ.get("MINIBROKER_BOOTSTRAP"):
        return _bootstrap_list(os.environ["MINIBROKER_BOOTSTRAP"], "$MINIBROKER_BOOTSTRAP")
    if os.environ.get("MINIBROKER_ZK"):
        return brokers_in_zookeeper(os.environ["MINIBROKER_ZK"])
    if (default_dir() / STATE_FILE).exists():
        return brokers_in_dir(default_dir())
    raise ClusterError(
        "cannot find a broker: give --bootstrap HOST:PORT, --zk HOST:PORT or --dir DIR "
        "(or set MINIBROKER_BOOTSTRAP / MINIBROKER_ZK)"
    )


def sources_in_zookeeper(zk_connect: str) -> list[Source]:
    """Every registered broker and every controller's published endpoint."""
    listener = client_listener()

    def broker(child: str, data: bytes | None) -> str | None:
        return registered_address(BrokerIdZNode.decode(int(child), data))

    def controller(child: str, data: bytes | None) -> str | None:
        ep = pick(from_strings(ControllerEndpointZNode.decode(data)), listener)
        return None if ep is None else ep.address

    out = []
    with zk_session(zk_connect) as zk:
        for kind, root, address_of in (
            ("broker", BrokerIdsZNode.path, broker),
            ("controller", ControllerEndpointZNode.root, controller),
        ):
            try:
                children = sorted(zk.children(root), key=lambda c: (len(c), c))
            except ZkNoNode:
                continue
            for child in children:
                try:
                    address = address_of(child, zk.get(f"{root}/{child}")[0])
                except (ZkNoNode, ZNodeFormatError, ValueError):
                    continue  # went away meanwhile, or not something we can read
                if address is not None:
                    out.append(Source(f"{kind} {child}", address))
    return out
