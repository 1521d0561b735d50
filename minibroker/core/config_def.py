"""Kafka's ConfigDef rules for the values of topic and broker configs: how a string parses for
each type and the validators Kafka's definitions use (atLeast, between, in, ValidList, the
throttled-replica list, the message format version). The messages are Kafka's own
(`clients/.../common/config/ConfigDef.java`), so that a client's error text reads as Kafka's."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum


class ConfigType(Enum):
    """ConfigDef.Type, with DescribeConfigs' wire number (DescribeConfigsResponse.ConfigType)."""

    BOOLEAN = 1
    STRING = 2
    INT = 3
    SHORT = 4
    LONG = 5
    DOUBLE = 6
    LIST = 7


INT_RANGE = (-(2**31), 2**31 - 1)
LONG_RANGE = (-(2**63), 2**63 - 1)
LONG_MAX = 2**63 - 1

# Why a parsed value is refused (Kafka's validator message), or None.
Validator = Callable[[object], str | None]


@dataclass(frozen=True)
class ConfigKey:
    """One config: its type, Kafka 2.6's default as Kafka prints it, and its validator."""

    name: str
    type: ConfigType
    default: str
    validator: Validator | None = None


class ConfigValueError(ValueError):
    """A value Kafka's ConfigDef would refuse; str() is Kafka's message."""


def parse(key: ConfigKey, raw: str) -> object:
    """The value of `raw` for `key` (bool, int, float, str or list of str); ConfigValueError
    with Kafka's message when it does not parse or its validator refuses it."""
    value = _parse_type(key, raw)
    problem = key.validator(value) if key.validator else None
    if problem is not None:
        raise ConfigValueError(f"Invalid value {raw} for configuration {key.name}: {problem}")
    return value


def _parse_type(key: ConfigKey, raw: str) -> object:
    text = raw.strip()
    kind = key.type
    if kind is ConfigType.BOOLEAN:
        if text.lower() in ("true", "false"):
            return text.lower() == "true"
        raise ConfigValueError(
            f"Invalid value {raw} for configuration {key.name}: "
            "Expected value to be either true or false"
        )
    if kind in (ConfigType.INT, ConfigType.SHORT, ConfigType.LONG):
        low, high = LONG_RANGE if kind is ConfigType.LONG else INT_RANGE
        if kind is ConfigType.SHORT:
            low, high = -(2**15), 2**15 - 1
        try:
            number = int(text)
        except ValueError:
            number = None
        if number is None or not low <= number <= high:
            raise ConfigValueError(
                f"Invalid value {raw} for configuration {key.name}: "
                f"Not a number of type {kind.name}"
            )
        return number
    if kind is ConfigType.DOUBLE:
        try:
            return float(text)
        except ValueError:
            raise ConfigValueError(
                f"Invalid value {raw} for configuration {key.name}: Not a number of type DOUBLE"
            ) from None
    if kind is ConfigType.LIST:
        return [item.strip() for item in text.split(",")] if text else []
    return text


# ---- validators (ConfigDef.Range, ValidString, ValidList, and two of Kafka's own) ------------


def at_least(minimum: float) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, int | float)
        return None if value >= minimum else f"Value must be at least {_num(minimum)}"

    return check


def between(low: float, high: float) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, int | float)
        if value < low:
            return f"Value must be at least {_num(low)}"
        if value > high:
            return f"Value must be no more than {_num(high)}"
        return None

    return check


def one_of(*allowed: str) -> Validator:
    def check(value: object) -> str | None:
        return None if value in allowed else f"String must be one of: {', '.join(allowed)}"

    return check


def list_of(*allowed: str) -> Validator:
    def check(value: object) -> str | None:
        assert isinstance(value, list)
        bad = [item for item in value if item not in allowed]
        return f"String must be one of: {', '.join(allowed)}" if bad else None

    return check


THROTTLED_REPLICAS_FORMAT = (
    "must be the literal '*' or a list of replicas in the following format: "
    "[partitionId]:[brokerId],[partitionId]:[brokerId],..."
)


def throttled_replicas(value: object) -> str | None:
    """Kafka's ThrottledReplicaListValidator: `*`, or `partition:broker` pairs of integers."""
    assert isinstance(value, list)
    if value == ["*"] or value == []:
        return None
    for item in value:
        part, sep, broker = item.partition(":")
        if not sep or not _is_int(part) or not _is_int(broker):
            return THROTTLED_REPLICAS_FORMAT
    return None


def parse_throttled_replicas(value: str) -> tuple[bool, frozenset[tuple[int, int]]]:
    """(all, {(partition, broker)}) from a valid throttled-replica list."""
    items = [i.strip() for i in value.split(",") if i.strip()]
    if items == ["*"]:
        return True, frozenset()
    pairs = set()
    for item in items:
        part, _, broker = item.partition(":")
        pairs.add((int(part), int(broker)))
    return False, frozenset(pairs)


# Kafka 2.6's ApiVersion short versions (kafka/api/ApiVersion.scala): a message format version
# is valid when its first two parts (three for 0.x) name one of them.
API_VERSIONS: Sequence[str] = (
    "0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0",
    "1.0", "1.1", "2.0", "2.1", "2.2", "2.3", "2.4", "2.5", "2.6",
)  # fmt: skip


def api_version(value: object) -> str | None:
    assert isinstance(value, str)
    base = value.split("-")[0]
    parts = base.split(".")
    short = ".".join(parts[:3] if parts[:1] == ["0"] else parts[:2])
    if short in API_VERSIONS and all(_is_int(p) for p in parts):
        return None
    return f"Version `{value}` is not a valid version"


def _is_int(text: str) -> bool:
    return text.strip().lstrip("-").isdigit()


def _num(x: float) -> str:
    return str(x)
