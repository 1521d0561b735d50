"""How client-side commands find the cluster: --zk, --bootstrap, --dir, or the environment.

Precedence: --zk, then --bootstrap (ask that broker for its zookeeper.connect), then an
explicit --dir; then $MINIBROKER_ZK, $MINIBROKER_BOOTSTRAP; then the default cluster dir.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from minibroker.client.admin import BrokerUnreachable, describe_broker
from minibroker.localcluster import DEFAULT_DIR, STATE_FILE, ClusterError, ClusterState


def default_dir() -> Path:
    return Path(os.environ.get("MINIBROKER_DIR") or DEFAULT_DIR)


def add_dir_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dir",
        type=Path,
        default=None,
        help=f"process-mode cluster dir (default: $MINIBROKER_DIR or {DEFAULT_DIR})",
    )


def add_locate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zk", help="ZooKeeper connect string (or $MINIBROKER_ZK)")
    parser.add_argument("--bootstrap", help="any broker's host:port (or $MINIBROKER_BOOTSTRAP)")
    add_dir_argument(parser)


def cluster_dir(args: argparse.Namespace) -> Path:
    return args.dir if args.dir is not None else default_dir()


def _from_bootstrap(address: str) -> str:
    try:
        return describe_broker(address).zookeeper_connect
    except BrokerUnreachable as exc:
        raise ClusterError(f"cannot reach the cluster through --bootstrap: {exc}") from None


def zk_connect(args: argparse.Namespace) -> str:
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
