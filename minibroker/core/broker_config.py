"""Broker configs that change while the cluster runs (`/config/brokers/<id>` and the
cluster-wide `/config/brokers/<default>`), as Kafka 2.6's DynamicBrokerConfig allows them: the
broker-level synonyms of every topic config (DynamicLogConfig) and the replication throttle
rates (DynamicConfig.Broker). Their validation, and where a value comes from (DescribeConfigs'
sources, `AdminManager.configSynonyms`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from enum import IntEnum

from minibroker.core.config_def import (
    LONG_MAX,
    ConfigKey,
    ConfigType,
    ConfigValueError,
    at_least,
    parse,
)
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.topic_config import TOPIC_CONFIGS

DEFAULT_ENTITY = "<default>"  # ConfigEntityName.Default: the cluster-wide broker entity
LEADER_THROTTLED_RATE = "leader.replication.throttled.rate"
FOLLOWER_THROTTLED_RATE = "follower.replication.throttled.rate"
ALTER_LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"


class ConfigSource(IntEnum):
    """DescribeConfigs' config_source (Kafka's DescribeConfigsResponse.ConfigSource)."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


def _dynamic_keys() -> dict[str, ConfigKey]:
    keys = {}
    for topic_config in TOPIC_CONFIGS.values():
        if topic_config.synonym is not None:
            k = topic_config.key
            keys[topic_config.synonym] = ConfigKey(
                topic_config.synonym, k.type, k.default, k.validator
            )
    for name in (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_RATE):
        keys[name] = ConfigKey(name, ConfigType.LONG, str(LONG_MAX), at_least(0))
    return keys


# Every broker config that may be set in /config/brokers, by name.
DYNAMIC_BROKER_CONFIGS: Mapping[str, ConfigKey] = _dynamic_keys()
# The three that exist only dynamically (no server.properties line sets them).
DYNAMIC_ONLY = frozenset({LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE, ALTER_LOG_DIRS_RATE})


def validate_dynamic_broker_config(config: Mapping[str, str], static_names: Iterable[str]) -> None:
    """Kafka's DynamicBrokerConfig.validate for an AlterConfigs of a broker entity: a broker
    setting that cannot change at run time is refused ("Cannot update these configs
    dynamically"), every dynamic value must parse and be valid. Names no broker knows are kept
    as Kafka keeps custom configs. Raises ApiError(INVALID_REQUEST) with Kafka's message, as
    AdminManager.alterConfigs wraps the ConfigException."""
    static = set(static_names)
    fixed = sorted(n for n in config if n in static and n not in DYNAMIC_BROKER_CONFIGS)
    if fixed:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Cannot update these configs dynamically: Set({', '.join(fixed)})",
        )
    for name, raw in config.items():
        key = DYNAMIC_BROKER_CONFIGS.get(name)
        if key is None:
            continue
        try:
            parse(key, raw)
        except ConfigValueError as exc:
            raise ApiError(ErrorCode.INVALID_REQUEST, str(exc)) from None


def broker_value_source(
    name: str,
    per_broker: Mapping[str, str],
    cluster_default: Mapping[str, str],
    static: Mapping[str, str],
) -> tuple[str, ConfigSource] | None:
    """Where a broker setting's value comes from, highest precedence first (Kafka's
    configSynonyms order): this broker's dynamic config, the cluster-wide dynamic default, the
    broker's own configuration; None when only Kafka's default applies."""
    for layer, source in (
        (per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
        (cluster_default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        (static, ConfigSource.STATIC_BROKER_CONFIG),
    ):
        if name in layer:
            return layer[name], source
    return None


def topic_value_source(
    name: str,
    topic: Mapping[str, str],
    per_broker: Mapping[str, str],
    cluster_default: Mapping[str, str],
    static: Mapping[str, str],
) -> tuple[str, ConfigSource]:
    """A topic config's value and its source (AdminManager.createTopicConfigEntry): the topic's
    override, else its broker synonym's value and source, else Kafka's default."""
    if name in topic:
        return topic[name], ConfigSource.DYNAMIC_TOPIC_CONFIG
    entry = TOPIC_CONFIGS[name]
    if entry.synonym is not None:
        found = broker_value_source(entry.synonym, per_broker, cluster_default, static)
        if found is not None:
            return found
    return entry.key.default, ConfigSource.DEFAULT_CONFIG
