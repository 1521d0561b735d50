"""`minibroker`: the command line. Subcommands live one module each in this package."""

from __future__ import annotations

import argparse
import importlib
import os
import sys

# The subcommands, one module each (minibroker/cli/NAME.py), in `minibroker --help`'s order.
# A command line that names one imports only that module: the others' imports (the dashboard's
# web server, kafka-python's admin client, the scenarios) cost ~0.4 s of CPU per call.
COMMANDS = (
    "cluster",
    "zk",
    "topics",
    "configs",
    "users",
    "acls",
    "certs",
    "produce",
    "consume",
    "events",
    "dashboard",
    "health",
    "demo",
    "loadgen",
    "scenario",
    "txn",
    "swarm",
)
LOADGEN = "loadgen"  # every flag after it is the load generator's (minibroker/cli/loadgen.py)


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser: every subcommand, or only `only` (one of COMMANDS)."""
    parser = argparse.ArgumentParser(
        prog="minibroker",
        description="Kafka's ZooKeeper-era replication, runnable and observable.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    for name in COMMANDS:
        if only is not None and name != only:
            continue
        module = importlib.import_module(f"minibroker.cli.{name}")
        if name == "demo":
            module.add_parser(sub, cli=main)
        else:
            module.add_parser(sub)
    return parser


def configure_security(args: argparse.Namespace) -> None:
    """The tools' ZooKeeper login and gRPC certificate: $MINIBROKER_ZK_JAAS and
    $MINIBROKER_TLS_CA / $MINIBROKER_TLS_CERT, else a secure --dir cluster's."""
    from minibroker.cli.locate import cluster_dir
    from minibroker.localcluster import ClusterError, secure
    from minibroker.localcluster.state import TOKEN_LISTENER
    from minibroker.runtime import grpc_security, zk_auth
    from minibroker.runtime.grpc_security import TlsFiles
    from minibroker.runtime.grpc_token_login import SaslLogin
    from minibroker.security.client_config import read_properties

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


def user_errors() -> tuple[type[Exception], ...]:
    """The errors a command reports in one line (imported once one is raised)."""
    from minibroker.core.errors import ApiError
    from minibroker.core.zk_layout import ZNodeFormatError
    from minibroker.localcluster import ClusterError
    from minibroker.runtime import grpc_security, zk_auth
    from minibroker.runtime.settings import ConfigError
    from minibroker.runtime.zk_server import ZooKeeperNotFound
    from minibroker.runtime.zk_store import ZkError

    return (
        zk_auth.ZkAuthError,
        grpc_security.GrpcTlsError,
        ApiError,
        ClusterError,
        ConfigError,
        ZNodeFormatError,
        ZooKeeperNotFound,
        ZkError,
    )


def client_errors() -> type[Exception]:
    from minibroker.client.errors import ClientError

    return ClientError


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == [LOADGEN]:
        from minibroker.cli import loadgen

        return loadgen.run(argv[1:])
    only = argv[0] if argv[:1] and argv[0] in COMMANDS else None
    args = build_parser(only).parse_args(argv)
    try:
        configure_security(args)
        code: int = args.func(args)
    except user_errors() as exc:
        print(f"minibroker: {exc}", file=sys.stderr)
        return 1
    except client_errors() as exc:
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
