"""The SCRAM credentials a broker authenticates with (Kafka's CredentialCache): every
`/config/users/<user>` read at start, one user read again on each `users/<user>` config change
notification (DynamicConfigManager hands those over). Passwords are never here, only salted
keys; SASL/PLAIN checks a password against them."""

from __future__ import annotations

import asyncio
import logging

from minibroker.core.security.scram import ScramCredential, ScramMechanism, password_matches
from minibroker.core.zk_layout import ConfigEntityZNode, ZNodeFormatError
from minibroker.core.zk_layout.security import UserScramCredentialsZNode
from minibroker.runtime import logging as slog
from minibroker.runtime.zk_errors import ZkNoNode
from minibroker.runtime.zk_store import ZkStore
from minibroker.security.user_store import USERS_ROOT

Credentials = dict[ScramMechanism, ScramCredential]


class CredentialCache:
    def __init__(self, store: ZkStore) -> None:
        self.store = store
        self._users: dict[str, Credentials] = {}

    def _read(self, user: str) -> Credentials:
        got = self.store.get_or_none(UserScramCredentialsZNode.path(user))
        if got is None or not got[0]:
            return {}
        try:
            return UserScramCredentialsZNode.credentials(ConfigEntityZNode.decode(got[0]))
        except ZNodeFormatError as exc:
            slog.event("credentials_ignored", logging.WARNING, user=user, error=str(exc))
            return {}

    def _read_all(self) -> dict[str, Credentials]:
        try:
            users = self.store.children(USERS_ROOT)
        except ZkNoNode:
            return {}
        return {u: c for u in users if (c := self._read(u))}

    async def load(self) -> None:
        self._users = await asyncio.to_thread(self._read_all)

    async def reload(self, user: str) -> None:
        """Read `user` again (after a config change notification)."""
        creds = await asyncio.to_thread(self._read, user)
        if creds:
            self._users[user] = creds
        else:
            self._users.pop(user, None)
        slog.event(
            "credentials_changed", user=user, mechanisms=sorted(m.mechanism_name for m in creds)
        )

    def scram(self, mechanism: ScramMechanism, user: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def has_user(self, user: str) -> bool:
        return bool(self._users.get(user))

    def check_password(self, user: str, password: str) -> bool:
        """Whether `password` is the user's (any of its SCRAM credentials derives from it).
        Called in a worker thread (the SASL gate's PLAIN): it only reads the cache."""
        creds = self._users.get(user)
        if not creds:
            return False
        mechanism, credential = next(iter(sorted(creds.items(), key=lambda kv: kv[0].name)))
        return password_matches(mechanism, credential, password)
