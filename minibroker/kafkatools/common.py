"""What Kafka's command-line tools share here: a parser that takes Kafka 2.6's flags and refuses
the ones minibroker does not support with one line naming the flag, the admin client a
`--bootstrap-server` tool talks through (kafka-python's, over the brokers' Kafka listeners, as
Kafka's tools use its AdminClient), the ZooKeeper session a `--zookeeper` tool writes through,
and one-line errors instead of stack traces.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

from minibroker.localcluster import ClusterError, zk_session
from minibroker.runtime.zk_store import ZkStore
from minibroker.security.client_config import ClientSecurity, read_properties

EXIT_ERROR = 1


class ToolError(Exception):
    """A mistake or a refusal: printed as one line, exit status 1."""


class ToolParser(argparse.ArgumentParser):
    """Kafka's flags (joptsimple's `--flag value`); any other flag is refused by name."""

    def __init__(self, tool: str, description: str) -> None:
        super().__init__(prog=tool, description=description, allow_abbrev=False)
        self.tool = tool

    def error(self, message: str) -> NoReturn:
        if "unrecognized arguments:" in message:
            flag = message.split(":", 1)[1].split()[0]
            message = f"{flag} is not supported by minibroker's {self.tool} (see --help)"
        print(f"{self.tool}: {message}", file=sys.stderr)
        sys.exit(EXIT_ERROR)

    def refuse(self, flag: str, why: str = "") -> NoReturn:
        self.error(
            f"{flag} is not supported by minibroker's {self.tool}" + (f": {why}" if why else "")
        )


def add_connection(parser: ToolParser, *, zookeeper: bool) -> None:
    """--bootstrap-server, --command-config, and (where Kafka 2.6 still has it) --zookeeper."""
    parser.add_argument(
        "--bootstrap-server", metavar="HOST:PORT", help="the brokers' Kafka listeners"
    )
    parser.add_argument("--command-config", type=Path, metavar="FILE", help="client properties")
    if zookeeper:
        parser.add_argument(
            "--zookeeper", metavar="HOST:PORT", help="ZooKeeper (deprecated in Kafka)"
        )


def security(path: Path | None) -> ClientSecurity:
    if path is None:
        return ClientSecurity()
    try:
        return read_properties(path)
    except (OSError, ValueError) as exc:
        raise ToolError(f"--command-config {path}: {exc}") from None


def admin(bootstrap: str, command_config: Path | None) -> Any:
    """kafka-python's admin client on `bootstrap`, logged in as --command-config says."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    try:
        return KafkaAdminClient(
            bootstrap_servers=bootstrap, request_timeout_ms=30_000, client_id="minibroker-tools",
            **security(command_config).kafka_python(),
        )  # fmt: skip
    except KafkaError as exc:
        raise ToolError(f"cannot reach {bootstrap}: {exc}") from None


@contextmanager
def zookeeper(connect: str) -> Iterator[ZkStore]:
    try:
        with zk_session(connect) as zk:
            yield zk
    except ClusterError as exc:
        raise ToolError(str(exc)) from None


def parse_pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    """`k=v` items (each may be a comma-separated list, as kafka-configs' --add-config)."""
    out: dict[str, str] = {}
    for value in values:
        for item in value.split(","):
            key, sep, v = item.partition("=")
            if not sep or not key.strip():
                raise ToolError(f"{flag} {item!r}: expected key=value")
            out[key.strip()] = v.strip()
    return out


def typed(settings: dict[str, Any], defaults: Mapping[str, Any], flag: str) -> dict[str, Any]:
    """Property strings (`--producer-property k=v`) as the types of the client's defaults
    (booleans, numbers); the login settings are refused: they go in the config file."""
    out: dict[str, Any] = {}
    for key, value in settings.items():
        if key.startswith(("security_", "sasl_", "ssl_")):
            raise ToolError(f"{flag} {key.replace('_', '.')}: put the login in the config file")
        default = defaults.get(key)
        try:
            if isinstance(value, str) and isinstance(default, bool):
                value = value.strip().lower() == "true"
            elif isinstance(value, str) and isinstance(default, int) and key != "acks":
                value = int(value)  # acks: a number or `all` (the console producer reads it)
            elif isinstance(value, str) and isinstance(default, float):
                value = float(value)
        except ValueError:
            raise ToolError(f"{flag} {key.replace('_', '.')}={value}: not a number") from None
        out[key] = value
    return out


def run(tool: str, body: Callable[[list[str]], int], argv: list[str] | None = None) -> int:
    """Runs a tool's body; any error is one line on stderr and exit status 1."""
    from kafka.errors import KafkaError

    try:
        return body(sys.argv[1:] if argv is None else argv)
    except (ToolError, ClusterError) as exc:
        print(f"{tool}: {exc}", file=sys.stderr)
    except KafkaError as exc:
        print(f"{tool}: {type(exc).__name__}: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a tool never answers with a stack trace
        print(f"{tool}: {getattr(exc, 'message', None) or exc}", file=sys.stderr)
    return EXIT_ERROR
