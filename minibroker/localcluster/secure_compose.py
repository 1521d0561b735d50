"""The compose cluster's `secure` profile (deploy/docker-compose.secure.yml): what
`cluster up --secure` does for local processes, done for containers.

A one-shot `security` service runs `python -m minibroker.localcluster.secure_compose` before
any node starts: into the project's `security` volume (mounted read-only at CONTAINER_DIR in
every node and the dashboard) it writes the CA, a certificate per node valid for the node's
service name and the host's 127.0.0.1, the admin's and the dashboard's certificates, the
ZooKeeper login (JAAS) and the admin's client properties; it writes the admin's SCRAM
credentials to ZooKeeper; and it copies the files to the host (deploy/secure, or
$MINIBROKER_SECURE_DIR) with the client properties' paths as the host sees them, the copy owned
by that folder's owner. The volume's files are kept while it lives (`up` again on a running
cluster changes nothing); `down -v` removes it, and the next `up` makes a fresh CA.

The nodes' settings (node_settings): gRPC listeners on TLS with client certificates required
(mutual TLS between nodes, and for the host's tools), both KAFKA listeners on SASL_SSL
(SCRAM-SHA-256/512, PLAIN), ZooKeeper login with `zookeeper.set.acl`, Kafka's AclAuthorizer
with the super user `admin`."""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import sys
from pathlib import Path

from minibroker import topology as t
from minibroker.localcluster import secure
from minibroker.localcluster.state import ADMIN_CONFIG
from minibroker.runtime import zk_auth
from minibroker.runtime.zk_client import ZkClient
from minibroker.security import user_store
from minibroker.security.certs import CA_CERT, CA_KEY, make_node_cert
from minibroker.security.client_config import ClientSecurity, read_properties, write_properties

CONTAINER_DIR = "/etc/minibroker/cluster"
CONTAINER_SECURITY = f"{CONTAINER_DIR}/{secure.SECURITY_DIR}"
HOST_DIR_ENV = "MINIBROKER_SECURE_DIR"
HOST_DIR_DEFAULT = "secure"  # next to the compose file: deploy/secure
RUNTIME_UID = 10001  # the runtime image's `minibroker` user (deploy/Dockerfile)


def node_settings(node: t.Node) -> dict[str, str]:
    """A secure container's deployment settings: the plain ones with every listener secured,
    its certificate, its ZooKeeper login, and (brokers) the authorizer."""
    settings = t.container_settings(node)
    kafka = [t.KAFKA_INTERNAL, t.KAFKA_EXTERNAL] if node.role == "broker" else []
    protocols = [f"{t.INTERNAL}:SSL", f"{t.EXTERNAL}:SSL", *(f"{k}:SASL_SSL" for k in kafka)]
    settings |= {
        "listener.security.protocol.map": ",".join(protocols),
        "ssl.keystore.location": f"{CONTAINER_SECURITY}/{node.name}.pem",
        "ssl.truststore.location": f"{CONTAINER_SECURITY}/{CA_CERT}",
        "ssl.client.auth": "required",
        "zookeeper.set.acl": "true",
        "minibroker.zookeeper.jaas.file": f"{CONTAINER_SECURITY}/{secure.ZK_JAAS}",
    }
    if node.role == "broker":
        settings |= {
            "ssl.principal.mapping.rules": secure.PRINCIPAL_RULES,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": f"User:{secure.ADMIN}",
        }
    return settings


def tools_environment(node_name: str) -> dict[str, str]:
    """A secure container's environment for the tools run in it (its health check,
    `docker compose exec ... minibroker`): its own certificate and the ZooKeeper login. The
    node's own process never takes these (runtime/grpc_security)."""
    return {
        zk_auth.ENV_JAAS: f"{CONTAINER_SECURITY}/{secure.ZK_JAAS}",
        "MINIBROKER_TLS_CA": f"{CONTAINER_SECURITY}/{CA_CERT}",
        "MINIBROKER_TLS_CERT": f"{CONTAINER_SECURITY}/{node_name}.pem",
    }


def prepare(cluster_dir: Path, nodes: list[t.Node]) -> str:
    """The security files in `cluster_dir` (the volume), each made only if missing; the admin's
    password (kept from an earlier run's admin.properties)."""
    sec = secure.security_dir(cluster_dir)
    sec.mkdir(parents=True, exist_ok=True)
    for name, role in [(n.name, n.role) for n in nodes] + [
        (secure.ADMIN, "client"),
        (secure.DASHBOARD, secure.DASHBOARD),
    ]:
        if not (sec / f"{name}.pem").exists():
            make_node_cert(sec, name, role, (name, *secure.HOSTS))
    if not (sec / secure.ZK_JAAS).exists():
        zk_auth.write_jaas(sec / secure.ZK_JAAS, secure.ZK_USER, secrets.token_urlsafe(18))
    admin_config = cluster_dir / ADMIN_CONFIG
    if admin_config.exists():
        return read_properties(admin_config).password
    password = secrets.token_urlsafe(18)
    write_client_configs(cluster_dir, CONTAINER_DIR, password)
    return password


def write_client_configs(cluster_dir: Path, paths_from: str, password: str) -> None:
    """admin.properties (SASL_SSL, SCRAM-SHA-512) and admin-ssl.properties (the admin
    certificate) in `cluster_dir`, naming the files under `paths_from`."""
    sec = f"{paths_from}/{secure.SECURITY_DIR}"
    ca = f"{sec}/{CA_CERT}"
    write_properties(
        cluster_dir / ADMIN_CONFIG,
        ClientSecurity("SASL_SSL", "SCRAM-SHA-512", secure.ADMIN, password, ca),
    )
    write_properties(
        cluster_dir / secure.ADMIN_SSL_CONFIG,
        ClientSecurity("SSL", ca_file=ca, keystore=f"{sec}/{secure.ADMIN}.pem"),
    )


def copy_to_host(cluster_dir: Path, host_mount: Path, host_dir: str, password: str) -> None:
    """The files for the host's tools and clients, owned by the host folder's owner, with the
    properties naming them as the host sees them (`host_dir`)."""
    owner = host_mount.stat()
    target = host_mount / secure.SECURITY_DIR
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(secure.security_dir(cluster_dir), target)
    write_client_configs(host_mount, host_dir.rstrip("/") or ".", password)
    for path in [target, *target.iterdir(), host_mount / ADMIN_CONFIG,
                 host_mount / secure.ADMIN_SSL_CONFIG]:  # fmt: skip
        os.chown(path, owner.st_uid, owner.st_gid)


def give_to_runtime(cluster_dir: Path) -> None:
    """The volume's files readable by the nodes' user only (keys are 0600), but for the CA's
    key: no node signs anything, so it stays root's (the host's copy has it, for `minibroker
    certs NAME --dir secure`)."""
    for path in [cluster_dir, *cluster_dir.rglob("*")]:
        if path.name != CA_KEY:
            os.chown(path, RUNTIME_UID, RUNTIME_UID)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m minibroker.localcluster.secure_compose")
    p.add_argument("--dir", type=Path, default=Path(CONTAINER_DIR))
    p.add_argument("--zk", default=f"{t.ZOOKEEPER}:{t.ZOOKEEPER_PORT}")
    p.add_argument("--host-mount", type=Path, help="where the host's folder is mounted")
    p.add_argument("--host-dir", default=HOST_DIR_DEFAULT, help="that folder as the host names it")
    args = p.parse_args(argv)
    password = prepare(args.dir, t.nodes())
    zk = ZkClient(args.zk, session_timeout_ms=10000, login=secure.zookeeper_login(args.dir))
    zk.start()
    try:
        user_store.set_password(zk, secure.ADMIN, password)
    finally:
        zk.stop()
    if args.host_mount is not None:
        copy_to_host(args.dir, args.host_mount, args.host_dir, password)
    if os.geteuid() == 0:
        give_to_runtime(args.dir)
    print(f"security: CA and certificates in {args.dir}; super user {secure.ADMIN} in ZooKeeper")
    return 0


if __name__ == "__main__":
    sys.exit(main())
