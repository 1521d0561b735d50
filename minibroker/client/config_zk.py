"""Entity configs in ZooKeeper, as Kafka 2.6's AdminZkClient writes them (what
`kafka-configs --zookeeper` does): `/config/topics/<t>` and `/config/brokers/<id|<default>>`,
then a `/config/changes/config_change_<seq>` notification naming the entity, which every broker
follows (broker.dynamic_config)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from minibroker.core.assignment import validate_topic_name
from minibroker.core.broker_config import DEFAULT_ENTITY, validate_dynamic_broker_config
from minibroker.core.errors import AdminOperationError
from minibroker.core.topic_config import validate_topic_config
from minibroker.core.zk_layout import (
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    DeleteTopicsTopicZNode,
    TopicZNode,
)
from minibroker.runtime.zk_store import ZkNodeExists, ZkNoNode, ZkStore


def read_entity_config(zk: ZkStore, entity_type: str, name: str) -> dict[str, str]:
    got = zk.get_or_none(ConfigEntityZNode.path(entity_type, name))
    return ConfigEntityZNode.decode(got[0]) if got is not None and got[0] else {}


def broker_entity(broker_id: int | None) -> str:
    """The entity name of one broker's configs, or of the cluster-wide default (None)."""
    return DEFAULT_ENTITY if broker_id is None else str(broker_id)


def _write(zk: ZkStore, entity_type: str, name: str, config: Mapping[str, str]) -> None:
    path = ConfigEntityZNode.path(entity_type, name)
    data = ConfigEntityZNode.encode(config)
    try:
        zk.set(path, data)
    except ZkNoNode:
        try:
            zk.create(path, data, makepath=True)
        except ZkNodeExists:
            zk.set(path, data)


def notify_change(zk: ZkStore, entity_path: str) -> str:
    """Kafka's createConfigChangeNotification: a persistent sequential node naming the entity."""
    return zk.create(
        ConfigEntityChangeNotificationSequenceZNode.path_prefix,
        ConfigEntityChangeNotificationSequenceZNode.encode(entity_path),
        sequential=True,
        makepath=True,
    )


def check_topic_alterable(zk: ZkStore, topic: str, config: Mapping[str, str]) -> None:
    """Kafka 2.6's AdminZkClient.validateTopicConfig: a legal name (INVALID_TOPIC_EXCEPTION), a
    topic that exists, else AdminOperationException, which Kafka 2.6's broker answers
    UNKNOWN_SERVER_ERROR (2.7 made it UNKNOWN_TOPIC_OR_PARTITION), and a LogConfig-valid
    config."""
    validate_topic_name(topic)
    if zk.exists(TopicZNode.path(topic)) is None:
        raise AdminOperationError(f'Topic "{topic}" does not exist.')
    validate_topic_config(config)


def change_topic_config(zk: ZkStore, topic: str, config: Mapping[str, str]) -> None:
    """Replace a topic's overrides (AdminZkClient.changeTopicConfig) and notify the brokers."""
    check_topic_alterable(zk, topic, config)
    _write(zk, "topics", topic, config)
    notify_change(zk, f"topics/{topic}")


def change_broker_config(
    zk: ZkStore,
    broker_id: int | None,
    config: Mapping[str, str],
    static_names: Iterable[str],
) -> None:
    """Replace one broker's dynamic configs, or the cluster-wide default's (None), after
    Kafka's validation (AdminZkClient.changeBrokerConfig), and notify the brokers."""
    validate_dynamic_broker_config(config, static_names)
    name = broker_entity(broker_id)
    _write(zk, "brokers", name, config)
    notify_change(zk, f"brokers/{name}")


def alter_entity(
    current: Mapping[str, str],
    add: Mapping[str, str],
    delete: Iterable[str],
) -> dict[str, str]:
    """`kafka-configs --alter --add-config ... --delete-config ...` over the stored config."""
    out = {k: v for k, v in current.items() if k not in set(delete)}
    out.update(add)
    return out


def topic_marked_for_deletion(zk: ZkStore, topic: str) -> bool:
    return zk.exists(DeleteTopicsTopicZNode.path(topic)) is not None
