"""Kafka's property names and 2.6 defaults, profiles, files and --set."""

from __future__ import annotations

from pathlib import Path

import pytest

from minibroker.runtime.settings import ConfigError, Settings, parse_properties


def load(**kw: object) -> Settings:
    return Settings.load(environ={}, **kw)  # type: ignore[arg-type]


def test_kafka_26_defaults() -> None:
    s = load()
    assert s.profile == "kafka"
    assert s.get_int("replica.lag.time.max.ms") == 30000
    assert s.get_int("zookeeper.session.timeout.ms") == 18000
    assert s.get_int("replica.fetch.wait.max.ms") == 500
    assert s.get_int("replica.fetch.backoff.ms") == 1000
    assert s.get_int("min.insync.replicas") == 1
    assert s.get_bool("unclean.leader.election.enable") is False
    assert s.get_int("replica.high.watermark.checkpoint.interval.ms") == 5000
    assert s.get_int("minibroker.isr.change.propagation.blackout.ms") == 5000
    assert s.zk_connection_timeout_ms == 18000


def test_demo_profile_makes_failover_seconds_and_says_so() -> None:
    s = load(profile="demo")
    assert s.get_int("zookeeper.session.timeout.ms") <= 10000
    assert s.get_int("replica.lag.time.max.ms") <= 5000
    # The session outlives the lag: a paused follower is removed by its leader first.
    assert s.get_int("zookeeper.session.timeout.ms") > s.get_int("replica.lag.time.max.ms")
    assert s.profile_summary().startswith("timing profile: demo (")


def test_profile_from_environment() -> None:
    assert Settings.load(environ={"MINIBROKER_PROFILE": "demo"}).profile == "demo"


def test_layers_file_then_set(tmp_path: Path) -> None:
    f = tmp_path / "b.properties"
    f.write_text("# comment\nreplica.lag.time.max.ms=12000\nmin.insync.replicas: 2\n")
    s = load(profile="demo", config_file=f, overrides=["min.insync.replicas=3"])
    assert s.get_int("replica.lag.time.max.ms") == 12000  # file beats profile
    assert s.get_int("min.insync.replicas") == 3  # --set beats file


def test_toml_dotted_and_quoted_keys(tmp_path: Path) -> None:
    f = tmp_path / "b.toml"
    f.write_text('replica.lag.time.max.ms = 9000\n"unclean.leader.election.enable" = true\n')
    s = load(config_file=f)
    assert s.get_int("replica.lag.time.max.ms") == 9000
    assert s.get_bool("unclean.leader.election.enable") is True


def test_zk_connect_from_environment_unless_set() -> None:
    assert Settings.load(environ={"MINIBROKER_ZK": "h:1"}).get_str("zookeeper.connect") == "h:1"
    s = Settings.load(environ={"MINIBROKER_ZK": "h:1"}, overrides=["zookeeper.connect=x:2"])
    assert s.get_str("zookeeper.connect") == "x:2"


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("replica.lag.time.max.msec=1", "did you mean 'replica.lag.time.max.ms'"),
        ("replica.lag.time.max.ms=soon", "expected an integer"),
        ("unclean.leader.election.enable=maybe", "expected true or false"),
        ("no-equals-sign", "expects name=value"),
        ("replica.fetch.wait.max.ms=40000", "must be <= replica.lag.time.max.ms"),
    ],
)
def test_bad_settings_are_clear_errors(override: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load(overrides=[override])


def test_unknown_profile_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="unknown profile"):
        load(profile="fast")
    with pytest.raises(ConfigError, match="cannot read config file"):
        load(config_file=tmp_path / "missing.properties")


def test_properties_parser_rejects_lines_without_value() -> None:
    with pytest.raises(ConfigError, match="line 2"):
        parse_properties("a=1\njust words\n")


def test_as_strings_prints_booleans_like_kafka() -> None:
    assert load().as_strings()["delete.topic.enable"] == "true"


def test_minibroker_settings_in_the_environment_sit_under_flags() -> None:
    """How compose brokers take settings: Kafka's names in $MINIBROKER_SETTINGS."""
    env = {"MINIBROKER_SETTINGS": "log.retention.check.interval.ms=1000, log.cleaner.backoff.ms=5"}
    s = Settings.load(environ=env, overrides=["log.cleaner.backoff.ms=7"])
    assert s.get_int("log.retention.check.interval.ms") == 1000
    assert s.get_int("log.cleaner.backoff.ms") == 7
    with pytest.raises(ConfigError, match="unknown property"):
        Settings.load(environ={"MINIBROKER_SETTINGS": "log.retention.hourz=1"})


def test_retention_and_roll_take_kafkas_coarser_units_when_ms_is_not_given() -> None:
    """KafkaConfig: log.retention.ms, else .minutes, else .hours; log.roll.ms, else .hours."""
    s = Settings.load(environ={}, overrides=["log.retention.hours=2", "log.roll.hours=1"])
    assert s.get_int("log.retention.ms") == 2 * 3_600_000
    assert s.get_int("log.roll.ms") == 3_600_000
    s = Settings.load(environ={}, overrides=["log.retention.minutes=3", "log.retention.hours=2"])
    assert s.get_int("log.retention.ms") == 180_000
    s = Settings.load(environ={}, overrides=["log.retention.ms=5", "log.retention.hours=2"])
    assert s.get_int("log.retention.ms") == 5
    assert (
        Settings.load(environ={}, overrides=["log.retention.hours=-1"]).get_int("log.retention.ms")
        == -1
    )


def test_a_listener_may_override_ssl_client_auth() -> None:
    """Kafka's `listener.name.<listener>.ssl.client.auth` (KIP-103): the listener's own value
    first, else the broker-wide one; a setting listeners cannot override is an unknown name."""
    s = load(overrides=["ssl.client.auth=required", "listener.name.token.ssl.client.auth=none"])
    assert s.listener_str("TOKEN", "ssl.client.auth") == "none"
    assert s.listener_str("PLAINTEXT", "ssl.client.auth") == "required"
    with pytest.raises(ConfigError, match="unknown property"):
        load(overrides=["listener.name.token.log.retention.ms=1"])


def test_the_token_master_key_is_never_shown() -> None:
    s = load(overrides=["delegation.token.master.key=s3cret"])
    assert s.get_str("delegation.token.master.key") == "s3cret"
    assert s.as_strings()["delegation.token.master.key"] == "[hidden]"
    assert "s3cret" not in str(s.static_strings())
    assert load().as_strings()["delegation.token.master.key"] == ""
