"""Who may call a broker's gRPC services when its listener speaks TLS with client
certificates (Kafka's CLUSTER_ACTION, by certificate): LeaderAndIsr, UpdateMetadata and
StopReplica only from a controller's certificate (OU=controller), a follower's fetch only from
the certificate of the broker it claims to be (OU=broker, CN=broker-<replica id>), and a
client's Produce, Fetch and DeleteRecords as its certificate's principal `User:<CN>` through
the broker's authorizer. On a plaintext listener nothing is checked (a plaintext cluster)."""

from __future__ import annotations

import logging
from typing import Any

from broker.security.authorizer import BrokerAuthorizer, Session
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.runtime import logging as slog
from minibroker.runtime.grpc_security import peer_identity
from minibroker.security.tls import ANONYMOUS


class GrpcPeerCheck:
    def __init__(self, enforced: bool, authorizer: BrokerAuthorizer, listener: str) -> None:
        self.enforced = enforced
        self.authorizer = authorizer
        self.listener = listener

    def _denied(self, context: Any, what: str) -> bool:
        peer = peer_identity(context)
        slog.event(
            "authorization_denied", logging.INFO, listener=self.listener,
            principal=peer.principal if peer else ANONYMOUS,
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
        peer = peer_identity(context) if self.enforced else None
        return Session(peer.principal if peer else ANONYMOUS, "")

    def topics_allowed(
        self, context: Any, operation: AclOperation, topics: set[str], *, log: bool = True
    ) -> set[str]:
        """The topics the caller may do `operation` on (the nodes may describe every one)."""
        if not self.enforced or (operation is AclOperation.DESCRIBE and self.node(context)):
            return topics
        return self.authorizer.allowed_names(
            self.session(context), operation, ResourceType.TOPIC, topics, log_denied=log
        )
