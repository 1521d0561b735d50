"""Topic-level configuration overrides (`/config/topics/<t>`): which keys minibroker accepts,
their value checks (Kafka's LogConfig rules for those keys), and the effective min.insync.replicas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from minibroker.core.errors import ApiError, ErrorCode

MIN_INSYNC_REPLICAS = "min.insync.replicas"
UNCLEAN_LEADER_ELECTION_ENABLE = "unclean.leader.election.enable"
# Kafka's default for min.insync.replicas (KafkaConfig and LogConfig), used when a topic has
# no override.
DEFAULT_MIN_INSYNC_REPLICAS = 1


def _int_at_least(minimum: int) -> Callable[[str], str | None]:
    def check(value: str) -> str | None:
        try:
            n = int(value)
        except ValueError:
            return "must be an integer"
        return None if n >= minimum else f"must be at least {minimum}"

    return check


def _boolean(value: str) -> str | None:
    return None if value.lower() in ("true", "false") else "must be true or false"


def _cleanup_policy(value: str) -> str | None:
    policies = [p.strip() for p in value.split(",")]
    if policies and all(p in ("delete", "compact") for p in policies):
        return None
    return "must be a list of delete and compact"


# The topic-level keys minibroker knows; each check returns why a value is bad, or None.
# segment.bytes' minimum is Kafka's (LegacyRecord.RECORD_OVERHEAD_V0); retention.ms -1 = forever.
TOPIC_CONFIG_CHECKS: Mapping[str, Callable[[str], str | None]] = {
    MIN_INSYNC_REPLICAS: _int_at_least(1),
    UNCLEAN_LEADER_ELECTION_ENABLE: _boolean,
    "segment.bytes": _int_at_least(14),
    "retention.ms": _int_at_least(-1),
    "cleanup.policy": _cleanup_policy,
}


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
    """Raise INVALID_CONFIG for a key minibroker does not know or a value Kafka would refuse."""
    for key, value in config.items():
        check = TOPIC_CONFIG_CHECKS.get(key)
        if check is None:
            known = ", ".join(sorted(TOPIC_CONFIG_CHECKS))
            raise ApiError(
                ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {key} (known: {known})"
            )
        problem = check(value)
        if problem is not None:
            raise ApiError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {value!r} for {key}: {problem}"
            )


def min_insync_replicas(
    config: Mapping[str, str], broker_default: int = DEFAULT_MIN_INSYNC_REPLICAS
) -> int:
    """The topic's min.insync.replicas: its override, else the brokers' setting."""
    raw = config.get(MIN_INSYNC_REPLICAS)
    try:
        return int(raw) if raw is not None else broker_default
    except ValueError:
        return broker_default
