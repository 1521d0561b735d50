"""A broker's security, put together from its settings: a TLS context for each SSL/SASL_SSL
Kafka listener, the SASL mechanisms, the SCRAM credentials and ACLs it follows in ZooKeeper,
and the authorizer. Built before anything binds (a bad setting stops the broker with one line),
started once the ZooKeeper session is up, before the listeners serve."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

from broker.security.acl_cache import AclCache
from broker.security.authorizer import (
    AuthorizerConfigError,
    BrokerAuthorizer,
    authorizer_config,
)
from broker.security.credentials import CredentialCache
from minibroker.core.listeners import uses_sasl, uses_tls
from minibroker.core.security.sasl import PLAIN
from minibroker.core.security.scram import ScramMechanism
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore
from minibroker.security.tls import TlsConfigError, server_context

SUPPORTED_MECHANISMS = frozenset({PLAIN, *(m.mechanism_name for m in ScramMechanism)})


class SecurityConfigError(ValueError):
    pass


class BrokerSecurity:
    def __init__(self, settings: Settings, protocols: Mapping[str, str]) -> None:
        """Raises SecurityConfigError for a setting that cannot work."""
        self.protocols = dict(protocols)
        self.tls: dict[str, ssl.SSLContext] = {}
        try:
            for listener, protocol in protocols.items():
                if uses_tls(protocol):
                    self.tls[listener] = server_context(
                        settings.get_str("ssl.keystore.location"),
                        settings.get_str("ssl.truststore.location"),
                        settings.get_str("ssl.client.auth"),
                    )
            config = authorizer_config(settings)
        except (TlsConfigError, AuthorizerConfigError) as exc:
            raise SecurityConfigError(str(exc)) from None
        mechanisms = tuple(
            m.strip() for m in settings.get_str("sasl.enabled.mechanisms").split(",") if m.strip()
        )
        unknown = [m for m in mechanisms if m not in SUPPORTED_MECHANISMS]
        if unknown:
            raise SecurityConfigError(
                f"sasl.enabled.mechanisms: {', '.join(unknown)} not available (these are: "
                f"{', '.join(sorted(SUPPORTED_MECHANISMS))})"
            )
        if not mechanisms and any(uses_sasl(p) for p in protocols.values()):
            raise SecurityConfigError("a SASL listener needs sasl.enabled.mechanisms")
        self.mechanisms = mechanisms
        self.credentials: CredentialCache | None = None
        self.acls: AclCache | None = None
        self.authorizer = BrokerAuthorizer(config, None)

    def sasl(self, listener: str) -> bool:
        return uses_sasl(self.protocols.get(listener, "PLAINTEXT"))

    async def start(self, store: ZkStore) -> None:
        self.credentials = CredentialCache(store)
        await self.credentials.load()
        if self.authorizer.config is not None:
            self.acls = AclCache(store)
            await self.acls.start()
            self.authorizer.acls = self.acls

    async def on_user_changed(self, user: str) -> None:
        if self.credentials is not None:
            await self.credentials.reload(user)

    async def stop(self) -> None:
        if self.acls is not None:
            await self.acls.stop()
