"""Configuration with Kafka's property names and 2.6 defaults (reference §7.1).

Sources, later wins: built-in defaults < timing profile < config file (.properties or .toml)
< `--set name=value`. Unknown names are an error (a typo would otherwise silently keep a
default timing). Properties prefixed `minibroker.` are this project's own, not Kafka's.
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

from minibroker.core.broker_config import DYNAMIC_BROKER_CONFIGS
from minibroker.core.planted_bugs import PlantedBug
from minibroker.runtime.properties import (
    DEFAULT_PROFILE,
    DEFAULT_ZK_CONNECT,
    LISTENER_PREFIX,
    MIN_OPEN_FILES,
    PER_LISTENER,
    PROFILES,
    PROPERTIES,
    PROPERTY_BY_NAME,
    Property,
)

__all__ = ["DEFAULT_ZK_CONNECT", "PROFILES", "ConfigError", "Settings", "parse_properties"]


class ConfigError(ValueError):
    """A configuration value or name is not acceptable; the message says which and why."""


def _text(value: Any) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _convert(prop: Property, raw: Any) -> Any:
    if isinstance(raw, prop.type) and not (prop.type is int and isinstance(raw, bool)):
        return raw
    text = str(raw).strip()
    if prop.type is bool:
        if text.lower() in ("true", "1", "yes"):
            return True
        if text.lower() in ("false", "0", "no"):
            return False
        raise ConfigError(f"{prop.name}: expected true or false, got {raw!r}")
    if prop.type is int:
        try:
            return int(text)
        except ValueError:
            raise ConfigError(f"{prop.name}: expected an integer, got {raw!r}") from None
    if prop.type is float:
        try:
            return float(text)
        except ValueError:
            raise ConfigError(f"{prop.name}: expected a number, got {raw!r}") from None
    return text


HIDDEN = "[hidden]"  # how a secret setting is shown (Kafka logs password configs so)


def _per_listener(name: str) -> Property | None:
    """`listener.name.<listener>.<setting>` for a setting listeners may override."""
    if not name.startswith(LISTENER_PREFIX):
        return None
    listener, _, base = name[len(LISTENER_PREFIX) :].partition(".")
    prop = PROPERTY_BY_NAME.get(base)
    if not listener or prop is None or base not in PER_LISTENER:
        return None
    return Property(name, prop.type, prop.default, f"{prop.doc} (listener {listener})")


def _shown(name: str, value: Any) -> str:
    return HIDDEN if value != "" and Settings.sensitive(name) else _text(value)


def _check_name(name: str) -> Property:
    prop = PROPERTY_BY_NAME.get(name) or _per_listener(name)
    if prop is None:
        close = difflib.get_close_matches(name, PROPERTY_BY_NAME, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ConfigError(f"unknown property {name!r}{hint}")
    return prop


def parse_assignment(text: str) -> tuple[str, str]:
    """Split one `--set name=value` argument."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip():
        raise ConfigError(f"--set expects name=value, got {text!r}")
    return name.strip(), value.strip()


def parse_properties(text: str) -> dict[str, str]:
    """Java .properties: `name=value` or `name: value` lines, `#`/`!` comments."""
    out: dict[str, str] = {}
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        for sep in ("=", ":"):
            if sep in line:
                name, _, value = line.partition(sep)
                out[name.strip()] = value.strip()
                break
        else:
            raise ConfigError(f"line {lineno}: expected name=value, got {line!r}")
    return out


def _flatten(table: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    # TOML dotted keys (replica.lag.time.max.ms = 3000) arrive as nested tables.
    out: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        else:
            out[name] = value
    return out


def read_config_file(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    if path.suffix == ".toml":
        try:
            return _flatten(tomllib.loads(text))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: {exc}") from None
    try:
        return dict(parse_properties(text))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


# Kafka's KafkaConfig: log.retention.ms, else .minutes, else .hours; log.roll.ms, else .hours.
_TIME_UNITS = (
    ("log.retention.ms", (("log.retention.minutes", 60_000), ("log.retention.hours", 3_600_000))),
    ("log.roll.ms", (("log.roll.hours", 3_600_000),)),
)


def _derive_time_units(values: dict[str, Any], explicit: set[str]) -> None:
    """A coarser unit given explicitly sets the milliseconds when they are not given."""
    for ms_name, units in _TIME_UNITS:
        if ms_name in explicit:
            continue
        for name, factor in units:
            if name in explicit:
                values[ms_name] = values[name] * factor if values[name] >= 0 else -1
                explicit.add(ms_name)
                break


class Settings:
    """Resolved configuration: typed values by Kafka property name, and the active profile.

    Three layers, as Kafka's DynamicBrokerConfig: the static configuration (defaults, profile,
    file, flags), under the cluster-wide dynamic defaults of /config/brokers/<default>, under
    this broker's own /config/brokers/<id>. Only the broker configs Kafka lets change at run
    time (minibroker.core.broker_config) are taken from the dynamic layers; everything that
    reads a value each time it needs it sees a change at once."""

    def __init__(
        self, values: Mapping[str, Any], profile: str, explicit: Iterable[str] = ()
    ) -> None:
        self._static = dict(values)
        self._values = dict(values)
        self._strings: Mapping[str, str] | None = None  # as_strings(), kept until a change
        self.profile = profile
        # The names set by the profile, a file, flags or the environment (Kafka's
        # STATIC_BROKER_CONFIG), as opposed to the built-in defaults.
        self.explicit = frozenset(explicit)
        self._dynamic: tuple[dict[str, str], dict[str, str]] = ({}, {})
        self._validate()

    @classmethod
    def load(
        cls,
        *,
        profile: str | None = None,
        config_file: Path | None = None,
        overrides: Iterable[str] = (),
        extra: Mapping[str, Any] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> Settings:
        """Defaults < profile < config file < $MINIBROKER_SETTINGS < `extra` (program flags)
        < `--set` overrides. $MINIBROKER_SETTINGS holds `name=value` pairs with Kafka's names,
        separated by spaces or commas: how a compose cluster's brokers take settings."""
        env = os.environ if environ is None else environ
        profile = profile or env.get("MINIBROKER_PROFILE") or DEFAULT_PROFILE
        if profile not in PROFILES:
            raise ConfigError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        values: dict[str, Any] = {p.name: p.default for p in PROPERTIES}
        explicit = set()
        if env.get("MINIBROKER_ZK"):
            values["zookeeper.connect"] = env["MINIBROKER_ZK"]
            explicit.add("zookeeper.connect")
        layers: list[Mapping[str, Any]] = [PROFILES[profile]]
        if config_file is not None:
            layers.append(read_config_file(config_file))
        if env.get("MINIBROKER_SETTINGS", "").strip():
            pairs = env["MINIBROKER_SETTINGS"].replace(",", " ").split()
            layers.append(dict(parse_assignment(p) for p in pairs))
        if extra:
            layers.append(extra)
        layers.append(dict(parse_assignment(o) for o in overrides))
        for layer in layers:
            for name, raw in layer.items():
                values[name] = _convert(_check_name(name), raw)
                explicit.add(name)
        _derive_time_units(values, explicit)
        return cls(values, profile, explicit)

    def _validate(self) -> None:
        # KafkaConfig's own check (reference §3.7).
        if self.get_int("replica.fetch.wait.max.ms") > self.get_int("replica.lag.time.max.ms"):
            raise ConfigError("replica.fetch.wait.max.ms must be <= replica.lag.time.max.ms")
        if self.get_int("zookeeper.session.timeout.ms") <= 0:
            raise ConfigError("zookeeper.session.timeout.ms must be positive")
        if self.get_int("minibroker.replica.fetch.linger.ms") < 0:
            raise ConfigError("minibroker.replica.fetch.linger.ms must be >= 0")
        if self.get_int("minibroker.log.max.open.files") < MIN_OPEN_FILES:
            raise ConfigError(f"minibroker.log.max.open.files must be >= {MIN_OPEN_FILES}")
        try:
            PlantedBug.parse(self.get_str("minibroker.test.planted.bug"))
        except ValueError as exc:
            raise ConfigError(f"minibroker.test.planted.bug: {exc}") from None

    def get_float(self, name: str) -> float:
        value = self._values[_check_name(name).name]
        assert isinstance(value, int | float)
        return float(value)

    def get_int(self, name: str) -> int:
        value = self._values[_check_name(name).name]
        assert isinstance(value, int)
        return value

    def get_str(self, name: str) -> str:
        return str(self._values[_check_name(name).name])

    def listener_str(self, listener: str, name: str) -> str:
        """`name` for one listener: `listener.name.<listener>.<name>` if set, else `name`."""
        prefixed = f"{LISTENER_PREFIX}{listener.lower()}.{name}"
        return str(self._values.get(prefixed, self.get_str(name)))

    @staticmethod
    def sensitive(name: str) -> bool:
        prop = PROPERTY_BY_NAME.get(name)
        return prop is not None and prop.sensitive

    def get_bool(self, name: str) -> bool:
        return bool(self._values[_check_name(name).name])

    @property
    def planted_bug(self) -> PlantedBug:
        """TEST ONLY: the known-wrong rule brokers must use (PlantedBug.NONE normally)."""
        return PlantedBug.parse(self.get_str("minibroker.test.planted.bug"))

    @property
    def zk_connection_timeout_ms(self) -> int:
        return self.get_int("zookeeper.connection.timeout.ms") or self.get_int(
            "zookeeper.session.timeout.ms"
        )

    def as_strings(self) -> dict[str, str]:
        """Every property as Kafka would print it (booleans lower-case, secrets hidden),
        dynamic values in."""
        return dict(self.strings_view())

    def strings_view(self) -> Mapping[str, str]:
        """`as_strings()` read-only and without a copy, built once per change of the values:
        each partition's topic configs fall back on it, and a sweep over 10,000 partitions
        formatting every setting for each cost an idle broker a few % of a core (issue 38)."""
        if self._strings is None:
            self._strings = MappingProxyType(
                {k: _shown(k, v) for k, v in sorted(self._values.items())}
            )
        return self._strings

    def static_strings(self) -> dict[str, str]:
        """The settings given explicitly (profile, file, flags), as strings."""
        return {k: v for k, v in self._static_strings().items() if k in self.explicit}

    def _static_strings(self) -> dict[str, str]:
        return {k: _shown(k, v) for k, v in sorted(self._static.items())}

    @property
    def dynamic(self) -> tuple[dict[str, str], dict[str, str]]:
        """The dynamic layers in force: (cluster-wide default, this broker's), as stored."""
        return dict(self._dynamic[0]), dict(self._dynamic[1])

    def apply_dynamic(
        self, cluster_default: Mapping[str, str], per_broker: Mapping[str, str]
    ) -> dict[str, tuple[str, str]]:
        """Replace the dynamic layers; returns {name: (old, new)} of the effective values that
        changed. Names that are not dynamic broker configs (custom ones, which Kafka keeps too)
        and values that do not convert are left out of the effective settings."""
        before = self.as_strings()
        values = dict(self._static)
        for layer in (cluster_default, per_broker):
            for name, raw in layer.items():
                prop = PROPERTY_BY_NAME.get(name)
                if prop is None or name not in DYNAMIC_BROKER_CONFIGS:
                    continue
                try:
                    values[name] = _convert(prop, raw)
                except ConfigError:
                    continue
        self._values = values
        self._strings = None
        self._dynamic = (dict(cluster_default), dict(per_broker))
        after = self.as_strings()
        return {k: (before[k], after[k]) for k in after if before.get(k) != after[k]}

    def profile_summary(self) -> str:
        """One line naming the profile and the timings it sets, for start-up logs."""
        keys = ("zookeeper.session.timeout.ms", "replica.lag.time.max.ms")
        timing = ", ".join(f"{k}={self._values[k]}" for k in keys)
        return f"timing profile: {self.profile} ({timing})"
