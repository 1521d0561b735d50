"""A broker's two replication quotas (KIP-73; Kafka's leader and follower
ReplicationQuotaManagers): the bytes of throttled partitions it sends as a leader and fetches
as a follower, measured over the quota window, against `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` (dynamic broker configs, read at every check), for the
partitions its topics' `*.replication.throttled.replicas` name with this broker."""

from __future__ import annotations

from collections.abc import Callable

from broker.replication.partition import Partition
from broker.replication.quota import (
    SimpleRate,
    quota_exceeded,
    should_follower_throttle,
    should_leader_throttle,
)
from broker.topic_configs import TopicConfigs
from minibroker.core.types import TopicPartition
from minibroker.runtime.settings import Settings

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


class ReplicationQuotas:
    def __init__(
        self, settings: Settings, topic_configs: TopicConfigs, now_ms: Callable[[], int]
    ) -> None:
        self.settings = settings
        self.topic_configs = topic_configs
        self.now_ms = now_ms
        samples = settings.get_int("replication.quota.window.num")
        window_ms = settings.get_int("replication.quota.window.size.seconds") * 1000
        self.leader = SimpleRate(samples, window_ms)
        self.follower = SimpleRate(samples, window_ms)

    # ---- leader side (ReplicaManager.readFromLocalLog, KafkaApis' record) ------------------

    def leader_throttles(self, tp: TopicPartition, partition: Partition, replica_id: int) -> bool:
        """Whether a follower's fetch of `tp` gets no records now."""
        throttled = self.topic_configs.leader_throttled(tp)
        if not throttled or replica_id in partition.isr:
            return False
        exceeded = quota_exceeded(self.leader, self.settings.get_int(LEADER_RATE), self.now_ms())
        return should_leader_throttle(False, throttled, exceeded)

    def record_leader(self, sizes: dict[TopicPartition, int]) -> None:
        """The bytes a follower fetch answer carries of throttled partitions (Kafka counts
        them all, in the ISR or not: sizeOfThrottledPartitions)."""
        total = sum(n for tp, n in sizes.items() if n and self.topic_configs.leader_throttled(tp))
        if total:
            self.leader.record(total, self.now_ms())

    # ---- follower side (ReplicaFetcherThread.buildFetch, processPartitionData) --------------

    def follower_throttles(self, tp: TopicPartition, in_sync: bool) -> bool:
        """Whether this follower leaves `tp` out of its next fetch."""
        throttled = self.topic_configs.follower_throttled(tp)
        if not throttled or in_sync:
            return False
        bound = self.settings.get_int(FOLLOWER_RATE)
        return should_follower_throttle(
            in_sync, throttled, quota_exceeded(self.follower, bound, self.now_ms())
        )

    def record_follower(self, tp: TopicPartition, size: int) -> None:
        if size and self.topic_configs.follower_throttled(tp):
            self.follower.record(size, self.now_ms())

    def describe(self) -> dict[str, float]:
        """Rates and bounds now, in bytes per second (the dashboard shows them)."""
        now = self.now_ms()
        return {
            "leader_rate": self.leader.rate(now),
            "leader_bound": float(self.settings.get_int(LEADER_RATE)),
            "follower_rate": self.follower.rate(now),
            "follower_bound": float(self.settings.get_int(FOLLOWER_RATE)),
        }
