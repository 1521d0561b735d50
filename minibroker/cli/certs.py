"""`minibroker certs`: a CA and certificates for a cluster's nodes and clients (PEM, keys 0600,
`minibroker/security/certs.py`). By default into the --dir cluster's `security/` (the CA of a
`cluster up --secure` cluster), so a new client certificate is trusted by its brokers:

    minibroker certs alice                       # DIR/security/alice.pem, principal User:alice
    minibroker certs --out ./pki broker-1 broker-2 --role broker --host broker-1
"""

from __future__ import annotations

import argparse
from pathlib import Path

from minibroker.cli.locate import add_dir_argument, cluster_dir
from minibroker.localcluster.secure import HOSTS, security_dir
from minibroker.security.certs import CA_CERT, make_node_cert


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("certs", help="make a CA and node or client certificates (PEM)")
    p.add_argument("names", nargs="+", metavar="NAME", help="a certificate per name (its CN)")
    p.add_argument(
        "--role",
        default="client",
        choices=("client", "broker", "controller"),
        help="the certificate's OU: client (default), or a node's role",
    )
    p.add_argument(
        "--host",
        action="append",
        default=[],
        help="a DNS name or address the certificate is valid for (repeatable; "
        "always localhost and 127.0.0.1)",
    )
    p.add_argument(
        "--out", type=Path, help="the directory (default: the --dir cluster's security/)"
    )
    add_dir_argument(p)
    p.set_defaults(func=cmd_certs)


def cmd_certs(args: argparse.Namespace) -> int:
    out: Path = args.out or security_dir(cluster_dir(args))
    for name in args.names:
        cert = make_node_cert(out, name, args.role, (*HOSTS, *args.host))
        print(f"{cert.path}  (principal {cert.principal}; with the secure cluster's mapping "
              f"rules: User:{name})")  # fmt: skip
    print(f"CA: {out / CA_CERT}")
    return 0
