"""The authorizer every request handler asks (KafkaApis.authorize with AclAuthorizer): off
unless `authorizer.class.name` names Kafka's ACL authorizer, in which case the decision is
`minibroker.core.security.acl.authorize` over the ACLs the broker follows. A denial is an
`authorization_denied` event (Kafka's authorizer log at INFO), unless the caller asks for
silence (Metadata filtering topics, as Kafka's logIfDenied=false)."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass

from broker.security.acl_cache import AclCache
from minibroker.core.security.acl import (
    CLUSTER_NAME,
    AclOperation,
    AuthorizerConfig,
    ResourceType,
    authorize,
    pascal_name,
)
from minibroker.runtime import logging as slog
from minibroker.runtime.settings import Settings
from minibroker.security.tls import ANONYMOUS

ACL_AUTHORIZERS = frozenset(
    {"kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer"}
)


class AuthorizerConfigError(ValueError):
    pass


@dataclass(frozen=True)
class Session:
    """Who sent a request: the authenticated principal and the client's address."""

    principal: str = ANONYMOUS
    host: str = ""


def authorizer_config(settings: Settings) -> AuthorizerConfig | None:
    """The ACL authorizer's settings, or None when no authorizer is configured."""
    name = settings.get_str("authorizer.class.name").strip()
    if not name:
        return None
    if name not in ACL_AUTHORIZERS:
        raise AuthorizerConfigError(
            f"authorizer.class.name {name!r}: only kafka.security.authorizer.AclAuthorizer "
            "is available"
        )
    supers = frozenset(s.strip() for s in settings.get_str("super.users").split(";") if s.strip())
    return AuthorizerConfig(
        super_users=supers,
        allow_everyone_if_no_acl_found=settings.get_bool("allow.everyone.if.no.acl.found"),
    )


class BrokerAuthorizer:
    def __init__(self, config: AuthorizerConfig | None, acls: AclCache | None) -> None:
        self.config = config
        self.acls = acls

    @property
    def enabled(self) -> bool:
        return self.config is not None and self.acls is not None

    def allowed(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_denied: bool = True,
    ) -> bool:
        if self.config is None:
            return True  # KafkaApis.authorize without an authorizer
        if self.acls is None:
            return False  # configured but its ACLs not loaded yet: closed, never open
        ok = authorize(
            self.acls.acls, self.config, session.principal, session.host, operation,
            resource_type, name,
        )  # fmt: skip
        if not ok and log_denied:
            slog.event(
                "authorization_denied", logging.INFO, principal=session.principal,
                host=session.host, operation=pascal_name(operation),
                resource=f"{pascal_name(resource_type)}:{name}",
            )  # fmt: skip
        return ok

    def cluster(
        self, session: Session, operation: AclOperation, *, log_denied: bool = True
    ) -> bool:
        return self.allowed(
            session, operation, ResourceType.CLUSTER, CLUSTER_NAME, log_denied=log_denied
        )

    def allowed_names(
        self,
        session: Session,
        operation: AclOperation,
        resource_type: ResourceType,
        names: Iterable[str],
        *,
        log_denied: bool = True,
    ) -> set[str]:
        """The names among `names` the session may act on (KafkaApis.filterByAuthorized)."""
        return {
            n
            for n in set(names)
            if self.allowed(session, operation, resource_type, n, log_denied=log_denied)
        }
