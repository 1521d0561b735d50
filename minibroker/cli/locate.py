"""The command lines' flags for finding the cluster (--zk, --bootstrap, --dir); the finding
itself is minibroker/locate.py's, re-exported here for the commands."""

from __future__ import annotations

import argparse
from pathlib import Path

from minibroker.localcluster import DEFAULT_DIR
from minibroker.locate import (
    bootstrap_servers,
    client_listener,
    cluster_dir,
    default_dir,
    registered_address,
    sources_in_zookeeper,
    zk_connect,
)

__all__ = [
    "add_dir_argument",
    "add_locate_arguments",
    "bootstrap_servers",
    "client_listener",
    "cluster_dir",
    "default_dir",
    "registered_address",
    "sources_in_zookeeper",
    "zk_connect",
]


def add_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"process-mode cluster dir (default: $MINIBROKER_DIR or {DEFAULT_DIR}); for a "
        "secure compose cluster, its security files (deploy/secure): the ZooKeeper login and "
        "the admin certificate",
    )


def add_locate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zk", help="ZooKeeper connect string (or $MINIBROKER_ZK)")
    parser.add_argument("--bootstrap", help="any broker's host:port (or $MINIBROKER_BOOTSTRAP)")
    parser.add_argument(
        "--command-config",
        type=Path,
        help="Kafka client properties, as Kafka's tools take them: with ssl.keystore.location "
        "and ssl.truststore.location (or ssl.ca.location) the brokers' TLS listeners are "
        "dialed with that certificate; with sasl.mechanism and a user and password but no "
        "certificate, the tools log in (SCRAM or PLAIN) on the brokers' TOKEN listener and "
        "carry the token (default: a secure --dir cluster's admin certificate)",
    )
    add_dir_argument(parser)
