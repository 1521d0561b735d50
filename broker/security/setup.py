"""A broker's security, put together from its settings: a TLS context for each SSL/SASL_SSL
Kafka listener, the SASL mechanisms, the SCRAM credentials and ACLs it follows in ZooKeeper,
and the authorizer. Built before anything binds (a bad setting stops the broker with one line),
started once the ZooKeeper session is up, before the listeners serve."""

from __future__ import annotations

import ssl
from collections.abc import Mapping

import grpc

from broker.security.acl_cache import AclCache
from broker.security.authorizer import (
    AuthorizerConfigError,
    BrokerAuthorizer,
    authorizer_config,
)
from broker.security.credentials import CredentialCache
from broker.security.grpc_peers import GrpcPeerCheck
from broker.security.grpc_tokens import TokenAuthority
from broker.security.token_gate import TokenGate
from minibroker.core.listeners import speaks_kafka, uses_sasl, uses_tls
from minibroker.core.security.principal_mapping import (
    map_principal,
    parse_rules,
)
from minibroker.core.security.sasl import PLAIN
from minibroker.core.security.scram import ScramMechanism
from minibroker.runtime import grpc_security
from minibroker.runtime.grpc_security import TlsFiles
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore
from minibroker.security.tls import ANONYMOUS, TlsConfigError, server_context

SUPPORTED_MECHANISMS = frozenset({PLAIN, *(m.mechanism_name for m in ScramMechanism)})


class SecurityConfigError(ValueError):
    pass


def _grpc_client_auth(settings: Settings, listener: str, inter_broker: str) -> bool:
    """Whether a TLS gRPC listener requires client certificates (`ssl.client.auth`, or its
    `listener.name.<listener>.ssl.client.auth`). gRPC cannot ask for an optional certificate,
    so `requested` is refused; the inter-broker listener must require them (nodes prove who
    they are by certificate). Without one a client is its token's user, or User:ANONYMOUS."""
    client_auth = settings.listener_str(listener, "ssl.client.auth")
    if client_auth not in ("none", "required"):
        raise SecurityConfigError(
            f"gRPC listener {listener}: ssl.client.auth={client_auth} is not possible (gRPC "
            "cannot ask for an optional certificate): use required, or none with tokens"
        )
    if listener == inter_broker and client_auth != "required":
        raise SecurityConfigError(
            f"gRPC listener {listener} is inter.broker.listener.name: it needs "
            "ssl.client.auth=required (brokers and controllers prove who they are by certificate)"
        )
    return client_auth == "required"


class BrokerSecurity:
    def __init__(self, settings: Settings, protocols: Mapping[str, str]) -> None:
        """Raises SecurityConfigError for a setting that cannot work."""
        self.protocols = dict(protocols)
        self.tls: dict[str, ssl.SSLContext] = {}
        try:
            for listener, protocol in protocols.items():
                if uses_tls(protocol):
                    # ssl.client.auth applies to SSL listeners; SASL_SSL ones authenticate
                    # with SASL and ask for no certificate (as Kafka since KIP-684).
                    client_auth = settings.listener_str(listener, "ssl.client.auth")
                    self.tls[listener] = server_context(
                        settings.get_str("ssl.keystore.location"),
                        settings.get_str("ssl.truststore.location"),
                        client_auth if protocol == "SSL" else "none",
                    )
            config = authorizer_config(settings)
            self.principal_rules = parse_rules(settings.get_str("ssl.principal.mapping.rules"))
        except (TlsConfigError, AuthorizerConfigError) as exc:
            raise SecurityConfigError(str(exc)) from None
        except ValueError as exc:
            raise SecurityConfigError(f"ssl.principal.mapping.rules: {exc}") from None
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
        # gRPC listeners on SSL: TLS with the same keystore, and every channel this broker
        # opens (fetchers, controlled shutdown) dials TLS with its certificate.
        self.grpc_tls: TlsFiles | None = None
        # Empty: the listener peers pick by themselves (core/listeners.pick).
        grpc_names = [n for n in protocols if not speaks_kafka(n)]
        inter_broker = settings.get_str("inter.broker.listener.name") or (
            "PLAINTEXT" if "PLAINTEXT" in grpc_names else next(iter(grpc_names), "")
        )
        self.grpc_client_auth = {
            n: _grpc_client_auth(settings, n, inter_broker)
            for n, p in protocols.items()
            if p == "SSL" and not speaks_kafka(n)
        }
        # Explicitly, so that a tools' environment a broker inherits is never taken.
        grpc_security.configure_client(None)
        if self.grpc_client_auth:
            self.grpc_tls = TlsFiles(
                settings.get_str("ssl.truststore.location"),
                settings.get_str("ssl.keystore.location"),
            )
            try:
                grpc_security.configure_client(self.grpc_tls)
            except grpc_security.GrpcTlsError as exc:
                raise SecurityConfigError(f"gRPC TLS: {exc}") from None
        self.credentials: CredentialCache | None = None
        self.acls: AclCache | None = None
        self.authorizer = BrokerAuthorizer(config, None)
        self.tokens = TokenAuthority(
            settings.get_str("delegation.token.master.key").encode(),
            settings.get_int("delegation.token.expiry.time.ms"),
            mechanisms,
            lambda: self.credentials,
        )

    def certificate_principal(self, dn: str | None) -> str:
        """The principal of a TLS client (User:ANONYMOUS without a certificate);
        NoMatchingRule when no mapping rule matches its name."""
        return ANONYMOUS if dn is None else f"User:{map_principal(self.principal_rules, dn)}"

    def grpc_credentials(self, listener: str) -> grpc.ServerCredentials | None:
        """A gRPC listener's TLS credentials (None: plaintext)."""
        if listener not in self.grpc_client_auth or self.grpc_tls is None:
            return None
        return self.grpc_tls.server_credentials(self.grpc_client_auth[listener])

    def grpc_peers(self, listener: str) -> GrpcPeerCheck:
        """The peer checks of a gRPC listener: enforced on TLS (certificate, token or
        User:ANONYMOUS); none in the clear."""
        return GrpcPeerCheck(
            listener in self.grpc_client_auth, self.authorizer, listener, self.tokens
        )

    def grpc_interceptors(self, listener: str) -> list[grpc.aio.ServerInterceptor]:
        """What a TLS gRPC listener checks before any handler: the token a call carries."""
        return [TokenGate(self.tokens, listener)] if listener in self.grpc_client_auth else []

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
