"""What a Kafka listener's handlers answer from: the replica manager, the listener the request
came in on (a Metadata answer gives that listener's endpoints, KIP-103), the cluster id, the
broker's producer ids and group coordinator (shared by its Kafka listeners), the authorizer,
and who sent the request (each connection gets its own copy with its session)."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.groups.coordinator import GroupCoordinator
from broker.kafka.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager
from broker.security.authorizer import BrokerAuthorizer, Session
from broker.transactions.coordinator import TransactionCoordinator
from minibroker.core.security.acl import AclOperation, ResourceType


@dataclass(frozen=True)
class KafkaContext:
    rm: ReplicaManager
    listener: str
    cluster_id: str
    producer_ids: ProducerIdManager
    groups: GroupCoordinator
    txns: TransactionCoordinator
    authorizer: BrokerAuthorizer
    session: Session = field(default_factory=Session)

    def may(
        self, operation: AclOperation, resource_type: ResourceType, name: str, *, log: bool = True
    ) -> bool:
        """Whether this request's principal may do `operation` on the resource."""
        return self.authorizer.allowed(self.session, operation, resource_type, name, log_denied=log)

    def may_cluster(self, operation: AclOperation, *, log: bool = True) -> bool:
        return self.authorizer.cluster(self.session, operation, log_denied=log)

    @property
    def fetch_max_bytes(self) -> int:
        return self.rm.settings.get_int("fetch.max.bytes")
