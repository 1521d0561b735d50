"""Topic-level configs (`/config/topics/<t>`): every key Kafka 2.6's LogConfig knows, with its
type, default, validator and broker-level synonym (`kafka/log/LogConfig.scala`), what minibroker
does with it, and the effective values it acts on (min.insync.replicas, segment.bytes, ...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from minibroker.core.config_def import (
    LONG_MAX,
    ConfigKey,
    ConfigType,
    ConfigValueError,
    Validator,
    api_version,
    at_least,
    between,
    list_of,
    one_of,
    parse,
    throttled_replicas,
)
from minibroker.core.errors import ApiError, ErrorCode

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
LEADER_THROTTLED_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_THROTTLED_REPLICAS = "follower.replication.throttled.replicas"
# Kafka's default for min.insync.replicas (KafkaConfig and LogConfig), used when a topic has
# no override.
DEFAULT_MIN_INSYNC_REPLICAS = 1


@dataclass(frozen=True)
class TopicConfig:
    """One LogConfig key: its definition, its broker-level synonym (the broker setting that is
    the topic's default, Kafka's TopicConfigSynonyms), and what minibroker does with it
    ("" = accepted, validated and reported, but without effect)."""

    key: ConfigKey
    synonym: str | None
    effect: str = ""

    @property
    def name(self) -> str:
        return self.key.name


def _c(
    name: str,
    kind: ConfigType,
    default: object,
    validator: Validator | None,
    synonym: str | None,
    effect: str = "",
) -> TopicConfig:
    text = str(default).lower() if isinstance(default, bool) else str(default)
    return TopicConfig(ConfigKey(name, kind, text, validator), synonym, effect)


_B, _S, _I, _L, _D, _LI = (
    ConfigType.BOOLEAN, ConfigType.STRING, ConfigType.INT, ConfigType.LONG, ConfigType.DOUBLE,
    ConfigType.LIST,
)  # fmt: skip

# Kafka 2.6's LogConfig.configDef, in its order of names.
TOPIC_CONFIGS: Mapping[str, TopicConfig] = {
    c.name: c
    for c in (
        _c("cleanup.policy", _LI, "delete", list_of("compact", "delete"), "log.cleanup.policy",
           "delete: retention deletes old segments; compact: the log cleaner keeps each key's "
           "last record"),
        _c("compression.type", _S, "producer",
           one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
           "compression.type"),
        _c("delete.retention.ms", _L, 86400000, at_least(0), "log.cleaner.delete.retention.ms",
           "how long the cleaner keeps tombstones past the last cleaned segment's time"),
        _c("file.delete.delay.ms", _L, 60000, at_least(0), "log.segment.delete.delay.ms",
           "a deleted segment's files are removed this long after it leaves the log"),
        _c("flush.messages", _L, LONG_MAX, at_least(0), "log.flush.interval.messages"),
        _c("flush.ms", _L, LONG_MAX, at_least(0), "log.flush.interval.ms"),
        _c(FOLLOWER_THROTTLED_REPLICAS, _LI, "", throttled_replicas, None,
           "replicas whose follower leaves them out of its fetches once "
           "follower.replication.throttled.rate is used (KIP-73)"),
        _c("index.interval.bytes", _I, 4096, at_least(0), "log.index.interval.bytes"),
        _c(LEADER_THROTTLED_REPLICAS, _LI, "", throttled_replicas, None,
           "replicas whose leader sends a non-ISR follower no records once "
           "leader.replication.throttled.rate is used (KIP-73)"),
        _c("max.compaction.lag.ms", _L, LONG_MAX, at_least(1),
           "log.cleaner.max.compaction.lag.ms",
           "a dirty segment older than this is cleaned whatever the dirty ratio"),
        _c("max.message.bytes", _I, 1048588, at_least(0), "message.max.bytes",
           "the largest record batch the partition's leader accepts"),
        _c("message.downconversion.enable", _B, True, None, "log.message.downconversion.enable"),
        _c("message.format.version", _S, "2.6-IV0", api_version, "log.message.format.version"),
        _c("message.timestamp.difference.max.ms", _L, LONG_MAX, at_least(0),
           "log.message.timestamp.difference.max.ms"),
        _c("message.timestamp.type", _S, "CreateTime", one_of("CreateTime", "LogAppendTime"),
           "log.message.timestamp.type"),
        _c("min.cleanable.dirty.ratio", _D, 0.5, between(0, 1), "log.cleaner.min.cleanable.ratio",
           "the cleaner takes a log once this share of it is dirty"),
        _c("min.compaction.lag.ms", _L, 0, at_least(0), "log.cleaner.min.compaction.lag.ms",
           "records younger than this stay uncleaned"),
        _c(MIN_INSYNC_REPLICAS, _I, 1, at_least(1), "min.insync.replicas",
           "acks=all produces need this many ISR members; applied at once when changed"),
        _c("preallocate", _B, False, None, "log.preallocate"),
        _c("retention.bytes", _L, -1, None, "log.retention.bytes",
           "retention deletes the oldest segments while the log is larger by one"),
        _c("retention.ms", _L, 604800000, at_least(-1), "log.retention.ms",
           "retention deletes segments whose newest record is older"),
        _c("segment.bytes", _I, 1073741824, at_least(14), "log.segment.bytes",
           "the partition's segment size, read when the broker opens the log"),
        _c("segment.index.bytes", _I, 10485760, at_least(0), "log.index.size.max.bytes"),
        _c("segment.jitter.ms", _L, 0, at_least(0), "log.roll.jitter.ms",
           "a random part of segment.ms per segment"),
        _c("segment.ms", _L, 604800000, at_least(1), "log.roll.ms",
           "a segment rolls once its first record is this old"),
        _c(UNCLEAN_LEADER_ELECTION_ENABLE, _B, False, None, "unclean.leader.election.enable",
           "the controller may elect a replica outside the ISR when none in it is alive"),
    )
}  # fmt: skip


class UnknownTopicConfig(ApiError):
    """A name LogConfig does not know (Kafka's InvalidConfigurationException)."""

    def __init__(self, name: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")


class InvalidTopicConfigValue(ApiError):
    """A value LogConfig's ConfigDef refuses. CreateTopics answers INVALID_CONFIG; AlterConfigs
    answers INVALID_REQUEST (Kafka's AdminManager wraps the ConfigException), see there."""

    def __init__(self, message: str) -> None:
        super().__init__(ErrorCode.INVALID_CONFIG, message)


def parse_config_pairs(pairs: Iterable[str]) -> dict[str, str]:
    """{"k": "v"} from "k=v" strings (Kafka's --config syntax); INVALID_CONFIG if one has no '='."""
    config: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ApiError(ErrorCode.INVALID_CONFIG, f"config must be KEY=VALUE, got {pair!r}")
        config[key.strip()] = value.strip()
    return config


def validate_topic_config(config: Mapping[str, str]) -> None:
    """Kafka's LogConfig.validate: every name known (UnknownTopicConfig), every value parsed
    and valid (InvalidTopicConfigValue), min.compaction.lag.ms ≤ max.compaction.lag.ms."""
    for name in config:
        if name not in TOPIC_CONFIGS:
            raise UnknownTopicConfig(name)
    values = {}
    for name, raw in config.items():
        try:
            values[name] = parse(TOPIC_CONFIGS[name].key, raw)
        except ConfigValueError as exc:
            raise InvalidTopicConfigValue(str(exc)) from None
    low = values.get("min.compaction.lag.ms", 0)
    high = values.get("max.compaction.lag.ms", LONG_MAX)
    assert isinstance(low, int) and isinstance(high, int)
    if low > high:
        raise ApiError(
            ErrorCode.INVALID_CONFIG,
            f"conflict topic config setting min.compaction.lag.ms ({low}) > "
            f"max.compaction.lag.ms ({high})",
        )


def topic_value(config: Mapping[str, str], name: str, broker: Mapping[str, str]) -> str:
    """A topic config's effective value as a string: the topic's override, else the broker's
    setting of its synonym (dynamic or static, as `broker` holds it), else Kafka's default."""
    if name in config:
        return config[name]
    entry = TOPIC_CONFIGS[name]
    if entry.synonym is not None and entry.synonym in broker:
        return broker[entry.synonym]
    return entry.key.default


def min_insync_replicas(
    config: Mapping[str, str], broker_default: int = DEFAULT_MIN_INSYNC_REPLICAS
) -> int:
    """The topic's min.insync.replicas: its override, else the brokers' setting."""
    raw = config.get(MIN_INSYNC_REPLICAS)
    try:
        return int(raw) if raw is not None else broker_default
    except ValueError:
        return broker_default


def without_effect() -> list[str]:
    """The topic configs minibroker accepts and reports but does not act on."""
    return [name for name, c in TOPIC_CONFIGS.items() if not c.effect]
