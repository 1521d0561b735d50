"""What a Kafka listener's handlers answer from: the replica manager, the listener the request
came in on (a Metadata answer gives that listener's endpoints, KIP-103), the cluster id, and
the broker's producer ids and group coordinator (shared by its Kafka listeners)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.groups.coordinator import GroupCoordinator
from broker.kafka.producer_ids import ProducerIdManager
from broker.replica_manager import ReplicaManager


@dataclass(frozen=True)
class KafkaContext:
    rm: ReplicaManager
    listener: str
    cluster_id: str
    producer_ids: ProducerIdManager
    groups: GroupCoordinator

    @property
    def fetch_max_bytes(self) -> int:
        return self.rm.settings.get_int("fetch.max.bytes")
