"""Who may call a broker's gRPC services when its listener speaks TLS with client
certificates (Kafka's CLUSTER_ACTION, by certificate): LeaderAndIsr, UpdateMetadata and
StopReplica only from a controller's certificate (OU=controller), a follower's fetch only from
the certificate of the broker it claims to be (OU=broker, CN=broker-<replica id>), and a
client's Produce, Fetch and DeleteRecords as its principal through the broker's authorizer: its
certificate's `User:<CN>`, else the `User:<name>` of the token it carries (grpc_tokens), else
User:ANONYMOUS. On a plaintext listener nothing is checked (a plaintext cluster)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

from broker.security.authorizer import BrokerAuthorizer, Session
from broker.security.grpc_tokens import TokenAuthority
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.security.tokens import InvalidToken
from minibroker.rpc import broker_pb2
from minibroker.runtime import logging as slog
from minibroker.runtime.grpc_security import peer_identity
from minibroker.security.tls import ANONYMOUS


class GrpcPeerCheck:
    def __init__(
        self,
        enforced: bool,
        authorizer: BrokerAuthorizer,
        listener: str,
        tokens: TokenAuthority | None = None,
    ) -> None:
        self.enforced = enforced  # a TLS listener: every call is checked
        self.authorizer = authorizer
        self.listener = listener
        self.tokens = tokens

    def principal(self, context: Any) -> str:
        """Who called: certificate, else token, else User:ANONYMOUS."""
        peer = peer_identity(context)
        if peer is not None:
            return peer.principal
        if self.tokens is not None:
            try:
                token = self.tokens.caller(context.invocation_metadata())
            except (InvalidToken, AttributeError):  # the token gate refused it already
                token = None
            if token is not None:
                return token.principal
        return ANONYMOUS

    def authenticate(
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[broker_pb2.AuthenticateResponse]:
        """The Authenticate exchange on this listener."""
        if self.tokens is None:
            return _disabled()
        return self.tokens.authenticate(requests, self.listener, context.peer(), self.enforced)

    def _denied(self, context: Any, what: str) -> bool:
        peer = peer_identity(context)
        slog.event(
            "authorization_denied", logging.INFO, listener=self.listener,
            principal=self.principal(context),
            role=peer.role if peer else "", operation="ClusterAction", resource=what,
        )  # fmt: skip
        return False

    def controller(self, context: Any, request: str) -> bool:
        """Whether the caller may send this controller request."""
        if not self.enforced:
            return True
        peer = peer_identity(context)
        return (peer is not None and peer.role == "controller") or self._denied(
            context, f"Cluster:{request}"
        )

    def follower(self, context: Any, replica_id: int) -> bool:
        """Whether the caller may fetch as the follower `replica_id`."""
        if not self.enforced:
            return True
        peer = peer_identity(context)
        ok = (
            peer is not None
            and peer.role == "broker"
            and peer.common_name == f"broker-{replica_id}"
        )
        return ok or self._denied(context, f"Cluster:Fetch as replica {replica_id}")

    def node(self, context: Any) -> bool:
        """Whether the caller is one of the cluster's own nodes (a broker's or a controller's
        certificate): what Kafka's CLUSTER_ACTION stands for."""
        peer = peer_identity(context) if self.enforced else None
        return peer is not None and peer.role in ("broker", "controller")

    def may_cluster(self, context: Any, operation: AclOperation) -> bool:
        """A cluster-wide request: a node, or a principal with `operation` on the Cluster."""
        if not self.enforced or self.node(context):
            return True
        return self.authorizer.cluster(self.session(context), operation)

    def session(self, context: Any) -> Session:
        return Session(self.principal(context) if self.enforced else ANONYMOUS, "")

    def may_write_transactional_id(self, context: Any, transactional_id: str) -> bool:
        """WRITE on the TransactionalId: a transactional Produce (KafkaApis)."""
        if not self.enforced:
            return True
        return self.authorizer.allowed(
            self.session(context), AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID,
            transactional_id,
        )  # fmt: skip

    def topics_allowed(
        self, context: Any, operation: AclOperation, topics: set[str], *, log: bool = True
    ) -> set[str]:
        """The topics the caller may do `operation` on (the nodes may describe every one)."""
        if not self.enforced or (operation is AclOperation.DESCRIBE and self.node(context)):
            return topics
        return self.authorizer.allowed_names(
            self.session(context), operation, ResourceType.TOPIC, topics, log_denied=log
        )


async def _disabled() -> AsyncIterator[broker_pb2.AuthenticateResponse]:
    yield broker_pb2.AuthenticateResponse(
        error_code=int(ErrorCode.SECURITY_DISABLED), error_message="no security on this listener"
    )
