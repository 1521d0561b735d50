"""Who a process is to ZooKeeper, and the ACLs its znodes get (Kafka's `zookeeper.set.acl`,
`ZkData.defaultAcls`). As a Kafka JVM takes its ZooKeeper login from the JAAS file of
`-Djava.security.auth.login.config` (its `Client` section), a minibroker process takes it from
a JAAS file too, for the whole process: `minibroker.zookeeper.jaas.file` for brokers and
controllers, `$MINIBROKER_ZK_JAAS` or a secure cluster's dir for the tools. The login is
ZooKeeper's digest scheme (DigestLoginModule's username and password), which Debian's
ZooKeeper 3.8 and kazoo both support without a SASL library.

With `zookeeper.set.acl`, each znode gets creator-all plus world-read, and the sensitive ones
(`/config/users`, `/config/brokers`, `/delegation_token/tokens` and below) creator-all only;
everyone else can read the cluster's state but write nothing."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

CREATOR_ALL = "creator_all"  # ZooDefs.Ids.CREATOR_ALL_ACL
READ_UNSAFE = "read_unsafe"  # ZooDefs.Ids.READ_ACL_UNSAFE
SENSITIVE_ROOT_PATHS = ("/config/users", "/config/brokers", "/delegation_token/tokens")
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"


class ZkAuthError(ValueError):
    """A JAAS file that cannot be used; the message says why."""


@dataclass(frozen=True)
class ZkLogin:
    username: str
    password: str
    set_acl: bool = False

    @property
    def auth_data(self) -> list[tuple[str, str]]:
        return [("digest", f"{self.username}:{self.password}")]

    def acl_for(self, path: str) -> tuple[str, ...] | None:
        """The ACL a new znode at `path` gets, as ZooKeeper's named ACLs (zk_client turns them
        into kazoo's): CREATOR_ALL, plus READ_UNSAFE (world-read) where not sensitive. None:
        ZooKeeper's open default."""
        if not self.set_acl:
            return None
        if any(path == p or path.startswith(p + "/") for p in SENSITIVE_ROOT_PATHS):
            return (CREATOR_ALL,)
        return (CREATOR_ALL, READ_UNSAFE)


def read_jaas(path: Path, set_acl: bool = False) -> ZkLogin:
    """The `Client` section's DigestLoginModule username and password."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise ZkAuthError(f"ZooKeeper JAAS file {path}: {exc.strerror}") from None
    section = re.search(r"\bClient\s*\{(.*?)\}\s*;", text, re.S)
    if section is None or DIGEST_LOGIN_MODULE not in section.group(1):
        raise ZkAuthError(f"{path}: no Client section with {DIGEST_LOGIN_MODULE}")
    options = dict(re.findall(r'(\w+)\s*=\s*"([^"]*)"', section.group(1)))
    if not options.get("username") or not options.get("password"):
        raise ZkAuthError(f"{path}: the Client section needs username and password")
    return ZkLogin(options["username"], options["password"], set_acl)


def write_jaas(path: Path, username: str, password: str) -> Path:
    """A JAAS file a Kafka broker (Client) and ZooKeeper tools read as well."""
    body = (
        f"Client {{\n  {DIGEST_LOGIN_MODULE} required\n"
        f'  username="{username}"\n  password="{password}";\n}};\n'
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(body)
    return path


ENV_JAAS = "MINIBROKER_ZK_JAAS"
_process_login: ZkLogin | None = None
_configured = False


def configure(login: ZkLogin | None) -> None:
    """This process's ZooKeeper login (every ZkClient made afterwards uses it)."""
    global _process_login, _configured
    _process_login = login
    _configured = True


def process_login() -> ZkLogin | None:
    """The configured login; a process nobody configured (a Spark worker, a tool) takes
    $MINIBROKER_ZK_JAAS, once (with zookeeper.set.acl: a login means a protected cluster)."""
    if not _configured:
        path = os.environ.get(ENV_JAAS)
        configure(read_jaas(Path(path), set_acl=True) if path else None)
    return _process_login
