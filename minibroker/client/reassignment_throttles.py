"""A move's replication throttle in ZooKeeper, as `kafka-reassign-partitions` writes it
(ReassignPartitionsCommand, KIP-73): set for a move, cleared once the moves are done. Used by
`minibroker topics reassign`, the operations scenarios and `python -m bench reassign`."""

from __future__ import annotations

from collections.abc import Iterable

from minibroker.client import config_zk, reassignment_plan
from minibroker.core.broker_config import FOLLOWER_THROTTLED_RATE, LEADER_THROTTLED_RATE
from minibroker.core.topic_config import FOLLOWER_THROTTLED_REPLICAS, LEADER_THROTTLED_REPLICAS
from minibroker.runtime.properties import PROPERTY_BY_NAME
from minibroker.runtime.zk_store import ZkStore

REPLICA_KEYS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
RATE_KEYS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)


def set_throttles(
    zk: ZkStore, current: reassignment_plan.Assignment, target: reassignment_plan.Assignment,
    rate: int,
) -> dict[str, tuple[str, str]]:  # fmt: skip
    """The leader side on every current replica of a moving partition, the follower side on its
    new replicas (topic configs), and both rates on every broker taking part; the replica lists
    written, per topic."""
    lists = reassignment_plan.throttled_replicas(current, target)
    for topic, (leader, follower) in lists.items():
        config = config_zk.read_entity_config(zk, "topics", topic)
        config.update({LEADER_THROTTLED_REPLICAS: leader, FOLLOWER_THROTTLED_REPLICAS: follower})
        config_zk.change_topic_config(zk, topic, config)
    for broker in sorted(reassignment_plan.reassigning_brokers(current, target)):
        config = config_zk.read_entity_config(zk, "brokers", str(broker))
        config.update(dict.fromkeys(RATE_KEYS, str(rate)))
        config_zk.change_broker_config(zk, broker, config, PROPERTY_BY_NAME)
    return lists


def clear_throttles(zk: ZkStore, topics: Iterable[str], brokers: Iterable[int]) -> None:
    """Remove the throttled-replica lists of `topics` and the rates of `brokers`, leaving their
    other configs; an entity with nothing to remove is not written."""
    for topic in topics:
        config = config_zk.read_entity_config(zk, "topics", topic)
        if any(k in config for k in REPLICA_KEYS):
            kept = {k: v for k, v in config.items() if k not in REPLICA_KEYS}
            config_zk.change_topic_config(zk, topic, kept)
    for broker in brokers:
        config = config_zk.read_entity_config(zk, "brokers", str(broker))
        if any(k in config for k in RATE_KEYS):
            kept = {k: v for k, v in config.items() if k not in RATE_KEYS}
            config_zk.change_broker_config(zk, broker, kept, PROPERTY_BY_NAME)
