"""The topic configs a broker acts on: each hosted topic's `/config/topics/<t>` overrides, read
when the topic's first partition is opened and again on every change notification, and the
effective values (override, else the broker's setting of the synonym, else Kafka's default) that
the partitions, their logs and the replication quotas use. On the broker's one event loop."""

from __future__ import annotations

from collections.abc import Mapping

from minibroker.core.config_def import parse_throttled_replicas
from minibroker.core.topic_config import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    MIN_INSYNC_REPLICAS,
    TOPIC_CONFIGS,
    topic_value,
)
from minibroker.core.types import TopicPartition
from minibroker.runtime.settings import Settings


class TopicConfigs:
    def __init__(self, settings: Settings, broker_id: int) -> None:
        self.settings = settings
        self.broker_id = broker_id
        self._overrides: dict[str, dict[str, str]] = {}
        # Per topic: the partitions this broker throttles as leader and as follower (None = all),
        # parsed once per change: the fetch paths ask for every partition they serve.
        self._throttled: dict[str, tuple[frozenset[int] | None, frozenset[int] | None]] = {}

    def known(self, topic: str) -> bool:
        return topic in self._overrides

    def overrides(self, topic: str) -> dict[str, str]:
        return dict(self._overrides.get(topic, {}))

    def set(self, topic: str, overrides: Mapping[str, str]) -> dict[str, tuple[str, str]]:
        """Store a topic's overrides as read from ZooKeeper; the effective values that changed,
        {name: (old, new)} (empty the first time)."""
        first = topic not in self._overrides
        before = self.effective(topic)
        self._overrides[topic] = dict(overrides)
        self._throttled[topic] = (
            self._own_partitions(overrides.get(LEADER_THROTTLED_REPLICAS, "")),
            self._own_partitions(overrides.get(FOLLOWER_THROTTLED_REPLICAS, "")),
        )
        after = self.effective(topic)
        if first:
            return {}
        return {k: (before[k], after[k]) for k in after if before[k] != after[k]}

    def forget(self, topic: str) -> None:
        self._overrides.pop(topic, None)
        self._throttled.pop(topic, None)

    def effective(self, topic: str) -> dict[str, str]:
        broker = self.settings.strings_view()
        config = self._overrides.get(topic, {})
        return {name: topic_value(config, name, broker) for name in TOPIC_CONFIGS}

    def value(self, topic: str, name: str) -> str:
        return topic_value(self._overrides.get(topic, {}), name, self.settings.strings_view())

    def min_insync_replicas(self, topic: str) -> int:
        raw = self.value(topic, MIN_INSYNC_REPLICAS)
        try:
            return max(1, int(raw))
        except ValueError:
            return self.settings.get_int("min.insync.replicas")

    def int_value(self, topic: str, name: str) -> int:
        try:
            return int(self.value(topic, name))
        except ValueError:
            return int(TOPIC_CONFIGS[name].key.default)

    def leader_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, leading `tp`, throttles what it sends non-ISR followers
        (leader.replication.throttled.replicas names `tp`'s partition with this broker, or is
        `*`: Kafka's TopicConfigHandler keeps only its own broker's entries)."""
        found = self._throttled.get(tp.topic)
        return found is not None and (found[0] is None or tp.partition in found[0])

    def follower_throttled(self, tp: TopicPartition) -> bool:
        """Whether this broker, following `tp` outside the ISR, throttles its own fetches."""
        found = self._throttled.get(tp.topic)
        return found is not None and (found[1] is None or tp.partition in found[1])

    def _own_partitions(self, raw: str) -> frozenset[int] | None:
        """The partitions a throttled-replica list names with this broker; None for `*`."""
        if not raw.strip():
            return frozenset()
        try:
            everything, pairs = parse_throttled_replicas(raw)
        except ValueError:
            return frozenset()
        if everything:
            return None
        return frozenset(p for p, b in pairs if b == self.broker_id)
