"""What every program's `__main__` shares: the common flags, settings, logging, signals."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from minibroker.core.listeners import (
    ListenerError,
    advertised_endpoints,
    parse_listeners,
    security_protocol_map,
)
from minibroker.runtime import logging as slog
from minibroker.runtime import zk_auth
from minibroker.runtime.settings import PROFILES, ConfigError, Settings
from minibroker.runtime.zk_store import ZkStore


def add_common_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", type=Path, help="a .properties or .toml file of settings")
    parser.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set one property (Kafka's name), e.g. --set replica.lag.time.max.ms=5000",
    )
    parser.add_argument(
        "--profile",
        choices=sorted(PROFILES),
        help="timing profile (default: $MINIBROKER_PROFILE or kafka)",
    )
    parser.add_argument("--zk", help="ZooKeeper connect string (zookeeper.connect)")
    parser.add_argument("--name", help="process name in log lines (default: <program>-<id>)")
    parser.add_argument(
        "--check",
        action="store_true",
        help="check the flags and settings, print the resolved settings as JSON and exit "
        "without starting anything (no ZooKeeper needed)",
    )


def load_settings(args: argparse.Namespace, extra: Mapping[str, Any]) -> Settings:
    """Settings from the common flags; exits with a one-line message on a bad value."""
    flags = dict(extra)
    if args.zk:
        flags["zookeeper.connect"] = args.zk
    try:
        return Settings.load(
            profile=args.profile,
            config_file=args.config,
            overrides=args.overrides,
            extra=flags,
        )
    except ConfigError as exc:
        raise SystemExit(f"configuration error: {exc}") from None


def check_listeners(settings: Settings, listeners: str, advertised: str, *, broker: bool) -> None:
    """Kafka's start-up checks of a server's listeners (KafkaConfig): parseable, distinct
    names, advertised names among them, every name mapped to a protocol (PLAINTEXT for gRPC,
    Kafka's four for KAFKA* listeners) and, on a broker, the inter-broker listener one of
    them. Exits on a problem."""
    try:
        endpoints = parse_listeners(settings.get_str(listeners), listeners)
        advertised_endpoints(
            endpoints, settings.get_str(advertised), {e.listener: e.port for e in endpoints}
        )
    except ListenerError as exc:
        raise SystemExit(f"configuration error: {exc}") from None
    try:
        security_protocol_map(settings.get_str("listener.security.protocol.map"), endpoints)
    except ListenerError as exc:
        raise SystemExit(f"configuration error: {exc}") from None
    inter = settings.get_str("inter.broker.listener.name")
    if broker and inter and inter not in {e.listener for e in endpoints}:
        raise SystemExit(
            f"configuration error: inter.broker.listener.name {inter!r} is not one of {listeners}"
        )


def print_check(program: str, settings: Settings) -> int:
    """`--check`: the resolved settings as JSON on stdout; nothing is started."""
    resolved = {"program": program, "profile": settings.profile, "settings": settings.as_strings()}
    print(json.dumps(resolved, indent=2))
    return 0


def install_stop_signals(stop: asyncio.Event) -> None:
    """SIGTERM and SIGINT ask the program to shut down cleanly."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)


def zk_store_for(settings: Settings) -> ZkStore:
    """The process's ZooKeeper session, configured by Kafka's zookeeper.* properties; its
    login (zk_auth) becomes the whole process's. Exits, as Kafka's KafkaServer does, when
    zookeeper.set.acl is set without a login."""
    jaas = settings.get_str("minibroker.zookeeper.jaas.file")
    set_acl = settings.get_bool("zookeeper.set.acl")
    try:
        login = zk_auth.read_jaas(Path(jaas), set_acl) if jaas else None
    except zk_auth.ZkAuthError as exc:
        raise SystemExit(f"configuration error: {exc}") from None
    if set_acl and login is None:
        raise SystemExit(
            "configuration error: zookeeper.set.acl is true, but no ZooKeeper login is "
            "configured (minibroker.zookeeper.jaas.file: a JAAS file with a Client section)"
        )
    zk_auth.configure(login)
    return ZkStore(
        settings.get_str("zookeeper.connect"),
        session_timeout_ms=settings.get_int("zookeeper.session.timeout.ms"),
        connection_timeout_ms=settings.zk_connection_timeout_ms,
        max_in_flight_requests=settings.get_int("zookeeper.max.in.flight.requests"),
    )


def log_startup(program: str, settings: Settings) -> None:
    slog.event(
        f"{program}_config",
        profile=settings.profile,
        summary=settings.profile_summary(),
        zookeeper_connect=settings.get_str("zookeeper.connect"),
    )
