"""`minibroker`: the command line. Subcommands live one module each in this package."""

from __future__ import annotations

import argparse
import os
import sys

from minibroker.cli import (
    acls,
    certs,
    cluster,
    configs,
    consume,
    dashboard,
    demo,
    events,
    health,
    loadgen,
    produce,
    scenario,
    topics,
    users,
    zk,
)
from minibroker.cli.locate import cluster_dir
from minibroker.client.errors import ClientError
from minibroker.core.errors import ApiError
from minibroker.core.zk_layout import ZNodeFormatError
from minibroker.localcluster import ClusterError, secure
from minibroker.localcluster.state import TOKEN_LISTENER
from minibroker.runtime import grpc_security, zk_auth
from minibroker.runtime.grpc_security import TlsFiles
from minibroker.runtime.grpc_token_login import SaslLogin
from minibroker.runtime.settings import ConfigError
from minibroker.runtime.zk_server import ZooKeeperNotFound
from minibroker.runtime.zk_store import ZkError
from minibroker.security.client_config import read_properties


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="minibroker",
        description="Kafka's ZooKeeper-era replication, runnable and observable.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    cluster.add_parser(sub)
    zk.add_parser(sub)
    topics.add_parser(sub)
    configs.add_parser(sub)
    users.add_parser(sub)
    acls.add_parser(sub)
    certs.add_parser(sub)
    produce.add_parser(sub)
    consume.add_parser(sub)
    events.add_parser(sub)
    dashboard.add_parser(sub)
    health.add_parser(sub)
    demo.add_parser(sub, cli=main)
    loadgen.add_parser(sub)
    scenario.add_parser(sub)
    return parser


def configure_security(args: argparse.Namespace) -> None:
    """The tools' ZooKeeper login and gRPC certificate: $MINIBROKER_ZK_JAAS and
    $MINIBROKER_TLS_CA / $MINIBROKER_TLS_CERT, else a secure --dir cluster's."""
    if getattr(args, "cluster_command", None) == "up":
        return  # the cluster is made afresh: nothing of an earlier one in this dir applies
    config = getattr(args, "command_config", None)
    if config is not None:
        try:
            client = read_properties(config)
        except (OSError, ValueError) as exc:
            raise ClusterError(f"--command-config {config}: {exc}") from None
        if hasattr(args, "dir"):
            secure.configure_tools(cluster_dir(args))  # its ZooKeeper login, if secure
        if client.keystore and client.ca_file:
            grpc_security.configure_client(TlsFiles(client.ca_file, client.keystore))
        elif client.mechanism and client.ca_file:
            # No certificate: a SCRAM login's token, on the brokers' certificate-less listener.
            login = SaslLogin(client.mechanism, client.username, client.password)
            grpc_security.configure_token_client(client.ca_file, login)
            os.environ.setdefault("MINIBROKER_LISTENER", TOKEN_LISTENER)
        return
    if os.environ.get(zk_auth.ENV_JAAS) or os.environ.get(grpc_security.ENV_CERT):
        return  # taken from the environment when first needed
    if hasattr(args, "dir"):
        secure.configure_tools(cluster_dir(args))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [loadgen.COMMAND]:
        # Every flag after `loadgen` is the load generator's; argparse here must not read them.
        return loadgen.run(argv[1:])
    args = build_parser().parse_args(argv)
    try:
        configure_security(args)
        code: int = args.func(args)
    except (
        zk_auth.ZkAuthError,
        grpc_security.GrpcTlsError,
        ApiError,
        ClusterError,
        ConfigError,
        ZNodeFormatError,
        ZooKeeperNotFound,
        ZkError,
    ) as exc:
        print(f"minibroker: {exc}", file=sys.stderr)
        return 1
    except ClientError as exc:
        # gRPC details can span lines; the error stays one line.
        print(f"minibroker: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`consume | head`): stop quietly, as `cat` would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(main())
