"""`cluster up --secure`: a process-mode cluster as an application meets a secured Kafka
cluster. A fresh CA and a certificate per node under `DIR/security/`; brokers' KAFKA listener
on SASL_SSL (SCRAM-SHA-256/512, PLAIN) and a KAFKA_SSL listener that requires a client
certificate; Kafka's ACL authorizer with the super user `admin`, whose SCRAM credentials (a
generated password) are written to ZooKeeper before any broker starts; and the admin's client
settings in `DIR/admin.properties` (SASL_SSL) and `DIR/admin-ssl.properties` (certificate).

ZooKeeper: every node logs in with the digest identity in `DIR/security/zookeeper.jaas` and
`zookeeper.set.acl` is on, so znodes are creator-all plus world-read (credentials: no world
read); the tools use the same file when given `--dir`.

gRPC: every node's listener is TLS with client certificates required; a broker takes
LeaderAndIsr, UpdateMetadata and StopReplica only from a controller's certificate and a
follower fetch only from that broker's; the tools dial with the admin certificate. Each broker
also has a TOKEN gRPC listener, TLS without client certificates, for clients that log in with
SCRAM and carry the token they get (`--command-config` with SASL properties and no
certificate); its key, `delegation.token.master.key`, is in `DIR/security/broker-secrets.properties`
(0600), which every broker reads with `--config`.

The dashboard (`cluster up --dashboard`, `minibroker dashboard --dir`) is served over TLS with
its own certificate and needs a login (dashboard/auth.py)."""

from __future__ import annotations

import os
import secrets
import ssl
from dataclasses import dataclass
from pathlib import Path

from minibroker import topology
from minibroker.dashboard.auth import DashboardAuth
from minibroker.localcluster.state import ADMIN_CONFIG, TOKEN_LISTENER
from minibroker.runtime import grpc_security, zk_auth
from minibroker.runtime.grpc_security import TlsFiles
from minibroker.runtime.zk_client import ZkClient
from minibroker.security import user_store
from minibroker.security.certs import CA_CERT, make_node_cert
from minibroker.security.client_config import ClientSecurity, write_properties
from minibroker.security.tls import server_context

SECURITY_DIR = "security"
ADMIN = "admin"
ADMIN_SSL_CONFIG = "admin-ssl.properties"
KAFKA_SSL_LISTENER = "KAFKA_SSL"
BROKER_SECRETS = "broker-secrets.properties"
# A certificate CN=<name>,OU=<role>,O=minibroker is the principal User:<name>.
PRINCIPAL_RULES = r"RULE:^CN=([^,]*),OU=[^,]*,O=minibroker$/$1/,DEFAULT"
HOSTS = ("localhost", "127.0.0.1")
ZK_JAAS = "zookeeper.jaas"
DASHBOARD = "dashboard"
ZK_USER = "kafka"  # one ZooKeeper identity for every node: creator-all ACLs must match


@dataclass(frozen=True)
class SecureCluster:
    dir: Path
    admin_password: str

    @property
    def security_dir(self) -> Path:
        return self.dir / SECURITY_DIR

    @property
    def ca_file(self) -> Path:
        return self.security_dir / CA_CERT

    @property
    def admin_config(self) -> Path:
        return self.dir / ADMIN_CONFIG


def security_dir(cluster_dir: Path) -> Path:
    return cluster_dir / SECURITY_DIR


def broker_secrets(cluster_dir: Path) -> Path:
    """The brokers' settings that are secrets (the token key): a file, not a command line."""
    return security_dir(cluster_dir) / BROKER_SECRETS


def prepare(cluster_dir: Path, nodes: list[topology.Node]) -> SecureCluster:
    """Certificates and the admin's client settings (ZooKeeper untouched: see add_admin)."""
    sec = security_dir(cluster_dir)
    for node in nodes:
        make_node_cert(sec, node.name, node.role, HOSTS)
    admin_cert = make_node_cert(sec, ADMIN, "client", HOSTS)
    fd = os.open(broker_secrets(cluster_dir), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(f"delegation.token.master.key={secrets.token_urlsafe(32)}\n")
    make_node_cert(sec, DASHBOARD, DASHBOARD, HOSTS)
    cluster = SecureCluster(cluster_dir, secrets.token_urlsafe(18))
    zk_auth.write_jaas(sec / ZK_JAAS, ZK_USER, secrets.token_urlsafe(18))
    ca = str(cluster.ca_file)
    write_properties(
        cluster.admin_config,
        ClientSecurity("SASL_SSL", "SCRAM-SHA-512", ADMIN, cluster.admin_password, ca),
    )
    write_properties(
        cluster_dir / ADMIN_SSL_CONFIG,
        ClientSecurity("SSL", ca_file=ca, keystore=str(admin_cert.path)),
    )
    return cluster


def zookeeper_login(cluster_dir: Path) -> zk_auth.ZkLogin | None:
    """The cluster's ZooKeeper login (None: not a secure cluster)."""
    path = security_dir(cluster_dir) / ZK_JAAS
    return zk_auth.read_jaas(path, set_acl=True) if path.exists() else None


def node_settings(cluster_dir: Path, node: topology.Node) -> dict[str, str]:
    """What every secure node (broker or controller) adds: its ZooKeeper login and ACLs, and
    its gRPC listener on TLS with client certificates required (mutual TLS between nodes and
    for tools), with its own certificate."""
    sec = security_dir(cluster_dir)
    return {
        "zookeeper.set.acl": "true",
        "minibroker.zookeeper.jaas.file": str(sec / ZK_JAAS),
        "listener.security.protocol.map": "PLAINTEXT:SSL",
        "ssl.keystore.location": str(sec / f"{node.name}.pem"),
        "ssl.truststore.location": str(sec / CA_CERT),
        "ssl.client.auth": "required",
    }


def configure_tools(cluster_dir: Path) -> bool:
    """A tool working on a secure --dir cluster: its ZooKeeper login and gRPC certificate (the
    admin's) for this process, and in the environment for its children (Spark workers).
    Whether the cluster is secure."""
    login = zookeeper_login(cluster_dir)
    tls = tools_tls(cluster_dir)
    if login is None or tls is None:
        return False
    zk_auth.configure(login)
    grpc_security.configure_client(tls)
    os.environ[zk_auth.ENV_JAAS] = str(security_dir(cluster_dir) / ZK_JAAS)
    os.environ[grpc_security.ENV_CA] = tls.ca_file
    os.environ[grpc_security.ENV_CERT] = tls.keystore
    return True


def dashboard_security(
    cluster_dir: Path, zk_connect: str, public_read: bool
) -> tuple[DashboardAuth, ssl.SSLContext] | None:
    """A secure cluster's dashboard: its login (SCRAM users; faults for the super user) and
    its TLS context (its own certificate). None: not a secure cluster."""
    cert = security_dir(cluster_dir) / f"{DASHBOARD}.pem"
    if not cert.exists():
        return None

    def check_password(user: str, password: str) -> bool:
        zk = ZkClient(zk_connect, session_timeout_ms=10000, login=zookeeper_login(cluster_dir))
        zk.start()
        try:
            return user_store.check_password(zk, user, password)
        finally:
            zk.stop()

    auth = DashboardAuth(check_password, frozenset({f"User:{ADMIN}"}), public_read)
    return auth, server_context(str(cert), "", "none")


def forget_tools() -> None:
    """Undo configure_tools: the process and its later children dial in the clear again."""
    zk_auth.configure(None)
    grpc_security.configure_client(None)
    for name in (zk_auth.ENV_JAAS, grpc_security.ENV_CA, grpc_security.ENV_CERT):
        os.environ.pop(name, None)


def tools_tls(cluster_dir: Path) -> TlsFiles | None:
    """The admin certificate the tools dial the cluster's gRPC listeners with."""
    sec = security_dir(cluster_dir)
    cert = sec / f"{ADMIN}.pem"
    return TlsFiles(str(sec / CA_CERT), str(cert)) if cert.exists() else None


def broker_settings(
    cluster_dir: Path, node: topology.Node, listeners: str, host: str, ports: tuple[int, int]
) -> dict[str, str]:
    """What a secure broker's deployment settings become: its `listeners` plus KAFKA_SSL and
    TOKEN on `ports`, the protocols, its certificate, and the authorizer."""
    tls_port, token_port = ports
    out = {
        "ssl.principal.mapping.rules": PRINCIPAL_RULES,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": f"User:{ADMIN}",
        f"listener.name.{TOKEN_LISTENER.lower()}.ssl.client.auth": "none",
    }
    out[node.listeners_setting] = (
        f"{listeners},{KAFKA_SSL_LISTENER}://{host}:{tls_port},{TOKEN_LISTENER}://{host}:{token_port}"
    )
    out["listener.security.protocol.map"] = (
        f"PLAINTEXT:SSL,KAFKA:SASL_SSL,{KAFKA_SSL_LISTENER}:SSL,{TOKEN_LISTENER}:SSL"
    )
    return out


def add_admin(cluster_dir: Path, zk_connect: str, password: str) -> None:
    """The super user's SCRAM credentials (both mechanisms), before any broker starts."""
    zk = ZkClient(zk_connect, session_timeout_ms=10000, login=zookeeper_login(cluster_dir))
    zk.start()
    try:
        user_store.set_password(zk, ADMIN, password)
    finally:
        zk.stop()
