"""Dynamic broker configs and config sources (minibroker.core.broker_config), and the settings'
dynamic layers: Kafka 2.6's DynamicBrokerConfig.validate, AdminManager's synonym order
(DynamicBrokerConfigTest, PlaintextAdminIntegrationTest.testDescribeConfigsForTopic /
checkInvalidAlterConfigs)."""

from __future__ import annotations

import pytest

from minibroker.core.broker_config import (
    ConfigSource,
    broker_value_source,
    topic_value_source,
    validate_dynamic_broker_config,
)
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.runtime.properties import PROPERTY_BY_NAME
from minibroker.runtime.settings import Settings

STATIC = set(PROPERTY_BY_NAME)


@pytest.mark.parametrize(
    "config",
    [
        {"leader.replication.throttled.rate": "1000", "follower.replication.throttled.rate": "0"},
        {"min.insync.replicas": "2", "log.retention.ms": "1000"},
        {"unclean.leader.election.enable": "true", "log.cleanup.policy": "compact"},
        {"some.custom.config": "kept as Kafka keeps custom configs"},
    ],
)
def test_dynamic_broker_configs(config: dict[str, str]) -> None:
    validate_dynamic_broker_config(config, STATIC)


@pytest.mark.parametrize(
    ("config", "why"),
    [
        ({"replica.lag.time.max.ms": "1"}, "Cannot update these configs dynamically"),
        ({"broker.id": "7"}, "Cannot update these configs dynamically: Set(broker.id)"),
        ({"leader.replication.throttled.rate": "-1"}, "Value must be at least 0"),
        ({"min.insync.replicas": "0"}, "Value must be at least 1"),
        ({"log.retention.ms": "soon"}, "Not a number of type LONG"),
    ],
)
def test_refused_broker_configs_are_invalid_requests(config: dict[str, str], why: str) -> None:
    with pytest.raises(ApiError, match=why.replace("(", r"\(").replace(")", r"\)")) as err:
        validate_dynamic_broker_config(config, STATIC)
    assert err.value.code is ErrorCode.INVALID_REQUEST


def test_a_topic_value_comes_from_the_first_layer_that_sets_it() -> None:
    topic = {"min.insync.replicas": "3"}
    own = {"log.retention.ms": "1000"}
    default = {"log.retention.ms": "2000", "log.segment.bytes": "5000"}
    static = {"log.segment.bytes": "9000", "compression.type": "lz4"}
    cases = {
        "min.insync.replicas": ("3", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        "retention.ms": ("1000", ConfigSource.DYNAMIC_BROKER_CONFIG),
        "segment.bytes": ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        "compression.type": ("lz4", ConfigSource.STATIC_BROKER_CONFIG),
        "cleanup.policy": ("delete", ConfigSource.DEFAULT_CONFIG),
        "leader.replication.throttled.replicas": ("", ConfigSource.DEFAULT_CONFIG),
    }
    for name, expected in cases.items():
        assert topic_value_source(name, topic, own, default, static) == expected, name
    assert broker_value_source("x", {}, {}, {}) is None


def test_settings_take_dynamic_layers_and_say_what_changed() -> None:
    settings = Settings.load(overrides=["min.insync.replicas=2"])
    assert settings.static_strings() == {"min.insync.replicas": "2"}
    changed = settings.apply_dynamic(
        {"min.insync.replicas": "3", "leader.replication.throttled.rate": "100"},
        {"leader.replication.throttled.rate": "50", "replica.lag.time.max.ms": "1"},
    )
    assert settings.get_int("min.insync.replicas") == 3  # the cluster-wide default
    assert settings.get_int("leader.replication.throttled.rate") == 50  # this broker's wins
    assert settings.get_int("replica.lag.time.max.ms") == 30000  # not dynamic: ignored
    assert changed["min.insync.replicas"] == ("2", "3")
    assert settings.apply_dynamic({}, {}) == {
        "min.insync.replicas": ("3", "2"),
        "leader.replication.throttled.rate": ("50", str(2**63 - 1)),
    }
