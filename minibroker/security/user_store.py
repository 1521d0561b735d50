"""SCRAM credentials in `/config/users/<user>` as `kafka-configs --alter --entity-type users
--add-config 'SCRAM-SHA-256=[password=...]'` writes them in Kafka 2.6 (ConfigCommand with
AdminZkClient.changeUserOrUserClientIdConfig): the user's config znode, then a
`/config/changes/config_change_<seq>` notification with `entity_path` `users/<user>`.
Only the salted keys are stored; the password never is. Blocking calls."""

from __future__ import annotations

import secrets

from minibroker.core.security.scram import (
    DEFAULT_ITERATIONS,
    ScramMechanism,
    make_credential,
    password_matches,
)
from minibroker.core.zk_layout import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ZNodeFormatError,
)
from minibroker.core.zk_layout.security import UserScramCredentialsZNode
from minibroker.runtime.zk_client import ZkClient
from minibroker.runtime.zk_errors import ZkNoNode

USERS_ROOT = "/config/users"


def _read_config(zk: ZkClient, user: str) -> dict[str, str]:
    got = zk.get_or_none(UserScramCredentialsZNode.path(user))
    if got is None or not got[0]:
        return {}
    try:
        return ConfigEntityZNode.decode(got[0])
    except ZNodeFormatError:
        return {}


def _write_config(zk: ZkClient, user: str, config: dict[str, str]) -> None:
    path = UserScramCredentialsZNode.path(user)
    data = ConfigEntityZNode.encode(config)
    if zk.exists(path) is None:
        zk.create(path, data, makepath=True)
    else:
        zk.set(path, data)
    zk.create(
        ConfigEntityChangeNotificationSequenceZNode.path_prefix,
        ConfigEntityChangeNotificationSequenceZNode.encode(f"users/{user}"),
        sequential=True,
        makepath=True,
    )


def valid_user_name(user: str) -> str | None:
    """Why a user name cannot be a znode name (None: it can)."""
    if not user or user in (".", "..") or "/" in user or any(ord(c) < 0x20 for c in user):
        return "a user name must be non-empty, without '/' or control characters"
    return None


def set_password(
    zk: ZkClient,
    user: str,
    password: str,
    mechanisms: tuple[ScramMechanism, ...] = tuple(ScramMechanism),
    iterations: int = DEFAULT_ITERATIONS,
) -> None:
    """Store fresh SCRAM credentials (new salt) for `user` under each mechanism."""
    problem = valid_user_name(user)
    if problem:
        raise ValueError(problem)
    if not password:
        raise ValueError("the password must not be empty")
    config = _read_config(zk, user)
    for mechanism in mechanisms:
        salt = secrets.token_bytes(24)
        config[mechanism.mechanism_name] = make_credential(
            mechanism, password, salt, iterations
        ).to_text()
    _write_config(zk, user, config)


def delete_user(zk: ZkClient, user: str) -> bool:
    """Remove the user's SCRAM credentials (other config kept); whether it had any."""
    config = _read_config(zk, user)
    names = {m.mechanism_name for m in ScramMechanism}
    if not names & set(config):
        return False
    _write_config(zk, user, {k: v for k, v in config.items() if k not in names})
    return True


def check_password(zk: ZkClient, user: str, password: str) -> bool:
    """Whether `password` is the user's (it derives one of its SCRAM credentials)."""
    if valid_user_name(user):
        return False
    creds = UserScramCredentialsZNode.credentials(_read_config(zk, user))
    return any(password_matches(m, c, password) for m, c in creds.items())


def list_users(zk: ZkClient) -> dict[str, tuple[str, ...]]:
    """Each user with SCRAM credentials and its mechanisms."""
    try:
        users = zk.children(USERS_ROOT)
    except ZkNoNode:
        return {}
    out = {}
    for user in users:
        creds = UserScramCredentialsZNode.credentials(_read_config(zk, user))
        if creds:
            out[user] = tuple(m.mechanism_name for m in creds)
    return out
