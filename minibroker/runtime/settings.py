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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker.core.planted_bugs import PlantedBug

DEFAULT_ZK_CONNECT = "127.0.0.1:2181"


class ConfigError(ValueError):
    """A configuration value or name is not acceptable; the message says which and why."""


@dataclass(frozen=True)
class Property:
    name: str
    type: type
    default: Any
    doc: str


# A log's append touches its active segment and index: a few more for recovery threads.
MIN_OPEN_FILES = 4

_P = Property
PROPERTIES: tuple[Property, ...] = (
    _P("broker.id", int, -1, "this broker's id (brokers only)"),
    _P("listeners", str, "PLAINTEXT://127.0.0.1:9092", "where the broker's gRPC server listens"),
    _P("advertised.listeners", str, "", "what the broker registers; empty = listeners"),
    _P(
        "listener.security.protocol.map",
        str,
        "PLAINTEXT:PLAINTEXT,KAFKA:PLAINTEXT",
        "listener name -> protocol; all PLAINTEXT (gRPC, or Kafka's own on KAFKA*)",
    ),
    _P(
        "inter.broker.listener.name",
        str,
        "",
        "the listener brokers and controllers use to reach brokers; empty = the first",
    ),
    _P("broker.rack", str, "", "rack written into the registration; empty = none"),
    _P("log.dirs", str, "/tmp/minibroker-logs", "the broker's log directory"),
    _P("zookeeper.connect", str, DEFAULT_ZK_CONNECT, "ZooKeeper connect string"),
    _P("zookeeper.session.timeout.ms", int, 18000, "ZooKeeper session timeout"),
    _P("zookeeper.connection.timeout.ms", int, 0, "wait for a connection; 0 = session timeout"),
    _P("zookeeper.max.in.flight.requests", int, 10, "pipelined ZooKeeper requests unanswered"),
    _P("replica.lag.time.max.ms", int, 30000, "follower lag before it leaves the ISR"),
    _P("replica.fetch.wait.max.ms", int, 500, "follower fetch max wait"),
    _P("replica.fetch.min.bytes", int, 1, ""),
    _P("replica.fetch.max.bytes", int, 1048576, "per partition"),
    _P("replica.fetch.response.max.bytes", int, 10485760, ""),
    _P("replica.fetch.backoff.ms", int, 1000, "follower backoff after a fetch error"),
    _P("replica.socket.timeout.ms", int, 30000, ""),
    _P(
        "max.incremental.fetch.session.cache.slots",
        int,
        1000,
        "fetch sessions a leader keeps (KIP-227); 0 = every fetch names every partition",
    ),
    _P("num.replica.fetchers", int, 1, ""),
    _P("replica.high.watermark.checkpoint.interval.ms", int, 5000, ""),
    _P("min.insync.replicas", int, 1, "topic-overridable; counts the leader"),
    _P("unclean.leader.election.enable", bool, False, "topic-overridable"),
    _P("controller.socket.timeout.ms", int, 30000, ""),
    _P("default.replication.factor", int, 1, ""),
    _P("num.partitions", int, 1, ""),
    _P("message.max.bytes", int, 1048588, "largest record batch a broker accepts"),
    _P("fetch.max.bytes", int, 57671680, "most a broker returns for one fetch (KIP-541)"),
    _P("socket.request.max.bytes", int, 104857600, "largest request on a Kafka listener"),
    _P("group.min.session.timeout.ms", int, 6000, "shortest session a group member may ask"),
    _P("group.max.session.timeout.ms", int, 1800000, "longest session a group member may ask"),
    _P("group.initial.rebalance.delay.ms", int, 3000, "an empty group waits this for members"),
    _P(
        "connections.max.idle.ms",
        int,
        600000,
        "a Kafka listener's connection idle this long closes",
    ),
    _P("log.segment.bytes", int, 1073741824, "segment size before a roll"),
    _P("delete.topic.enable", bool, True, ""),
    _P("controlled.shutdown.enable", bool, True, ""),
    _P("controlled.shutdown.max.retries", int, 3, ""),
    _P("controlled.shutdown.retry.backoff.ms", int, 5000, ""),
    _P("auto.leader.rebalance.enable", bool, True, ""),
    _P("leader.imbalance.check.interval.seconds", int, 300, ""),
    _P("leader.imbalance.per.broker.percentage", int, 10, ""),
    # Kafka hard-codes these three in ReplicaManager (2.7 moves them into a config object with
    # the same defaults); here they are settable so tests need not wait 5-7.5 s (reference §3.2).
    _P("minibroker.isr.change.propagation.interval.ms", int, 2500, "isr-change check period"),
    _P("minibroker.isr.change.propagation.blackout.ms", int, 5000, "quiet time before propagating"),
    _P(
        "minibroker.isr.change.propagation.max.delay.ms",
        int,
        60000,
        "propagate at least this often",
    ),
    _P(
        "minibroker.replica.fetch.linger.ms",
        int,
        10,
        "a leader holds a follower's fetch this long for more records once some arrived, "
        "unless an acks=all produce waits on them (fewer fetch round trips under load)",
    ),
    _P(
        "minibroker.log.max.open.files",
        int,
        1000,
        "segment and index files a broker keeps open, least recently used closed first",
    ),
    _P("minibroker.controller.id", int, -1, "this controller's id (controllers only)"),
    _P(
        "minibroker.controller.listeners",
        str,
        "PLAINTEXT://127.0.0.1:0",
        "where the controller's gRPC server listens (Kafka's listeners syntax)",
    ),
    _P(
        "minibroker.controller.advertised.listeners",
        str,
        "",
        "what the controller publishes in /minibroker/controllers/<id>; empty = listeners",
    ),
    _P("minibroker.metrics.port", int, 0, "Prometheus metrics port; 0 = off"),
    _P(
        "minibroker.metrics.host",
        str,
        "127.0.0.1",
        "address the metrics endpoint binds; 0.0.0.0 in containers, whose ports are published",
    ),
    _P(
        "minibroker.test.planted.bug",
        str,
        "",
        "TEST ONLY: a known-wrong replication rule, to prove the checkers catch it "
        "(hw-from-all-replicas, truncate-to-hw, shrink-on-no-fetch); empty = Kafka's rules",
    ),
)
PROPERTY_BY_NAME: Mapping[str, Property] = {p.name: p for p in PROPERTIES}

# Timing profiles. "kafka" is Kafka 2.6's defaults. "demo" makes failover a matter of seconds:
# a stalled follower leaves the ISR after 3-4.5 s (isr-expiration runs every lag/2, reference
# §3.1) and a killed broker's session expires after 6 s. The session outlives the lag, so a
# paused follower is first removed by its leader (the seeds' story), not by the controller.
PROFILES: Mapping[str, Mapping[str, Any]] = {
    "kafka": {},
    "demo": {
        "zookeeper.session.timeout.ms": 6000,
        "replica.lag.time.max.ms": 3000,
        "replica.fetch.wait.max.ms": 500,
        "replica.fetch.backoff.ms": 500,
        "controlled.shutdown.retry.backoff.ms": 1000,
        "replica.high.watermark.checkpoint.interval.ms": 1000,
    },
}
DEFAULT_PROFILE = "kafka"


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
    return text


def _check_name(name: str) -> Property:
    prop = PROPERTY_BY_NAME.get(name)
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


class Settings:
    """Resolved configuration: typed values by Kafka property name, and the active profile."""

    def __init__(self, values: Mapping[str, Any], profile: str) -> None:
        self._values = dict(values)
        self.profile = profile
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
        """Defaults < profile < config file < `extra` (program flags) < `--set` overrides."""
        env = os.environ if environ is None else environ
        profile = profile or env.get("MINIBROKER_PROFILE") or DEFAULT_PROFILE
        if profile not in PROFILES:
            raise ConfigError(f"unknown profile {profile!r}; known: {', '.join(PROFILES)}")
        values: dict[str, Any] = {p.name: p.default for p in PROPERTIES}
        if env.get("MINIBROKER_ZK"):
            values["zookeeper.connect"] = env["MINIBROKER_ZK"]
        layers: list[Mapping[str, Any]] = [PROFILES[profile]]
        if config_file is not None:
            layers.append(read_config_file(config_file))
        if extra:
            layers.append(extra)
        layers.append(dict(parse_assignment(o) for o in overrides))
        for layer in layers:
            for name, raw in layer.items():
                values[name] = _convert(_check_name(name), raw)
        return cls(values, profile)

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

    def get_int(self, name: str) -> int:
        value = self._values[_check_name(name).name]
        assert isinstance(value, int)
        return value

    def get_str(self, name: str) -> str:
        return str(self._values[_check_name(name).name])

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
        """Every property as Kafka would print it (booleans lower-case)."""
        return {
            k: (str(v).lower() if isinstance(v, bool) else str(v))
            for k, v in sorted(self._values.items())
        }

    def profile_summary(self) -> str:
        """One line naming the profile and the timings it sets, for start-up logs."""
        keys = ("zookeeper.session.timeout.ms", "replica.lag.time.max.ms")
        timing = ", ".join(f"{k}={self._values[k]}" for k in keys)
        return f"timing profile: {self.profile} ({timing})"
