"""The programs' shared start-up checks: listeners as KafkaConfig checks them, and `--check`."""

from __future__ import annotations

import json

import pytest

from minibroker import topology
from minibroker.runtime.program import check_listeners, print_check
from minibroker.runtime.settings import Settings

BROKER_KEYS = ("listeners", "advertised.listeners")


def settings(*overrides: str) -> Settings:
    return Settings.load(profile="demo", overrides=overrides, environ={})


@pytest.mark.parametrize(
    "overrides",
    [
        (),  # the defaults: one PLAINTEXT listener on loopback
        tuple(
            f"{k}={v}" for k, v in topology.container_settings(topology.Node("broker", 1)).items()
        ),
    ],
)
def test_good_listeners_pass(overrides: tuple[str, ...]) -> None:
    check_listeners(settings(*overrides), *BROKER_KEYS, broker=True)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (("listeners=PLAINTEXT//127.0.0.1:1",), "LISTENER://host:port"),
        (("listeners=A://h:1,A://h:2", "listener.security.protocol.map=A:PLAINTEXT"), "twice"),
        (("listeners=PLAINTEXT://0.0.0.0:9092",), "cannot advertise"),
        (("advertised.listeners=OTHER://h:1",), "is not one of listeners"),
        (("listeners=INTERNAL://127.0.0.1:1",), "no entry for listener 'INTERNAL'"),
        (("listener.security.protocol.map=PLAINTEXT:SASL_SSL",), "speaks gRPC"),
        (("inter.broker.listener.name=INTERNAL",), "inter.broker.listener.name"),
    ],
)
def test_bad_listeners_stop_the_program(overrides: tuple[str, ...], message: str) -> None:
    with pytest.raises(SystemExit) as exc:
        check_listeners(settings(*overrides), *BROKER_KEYS, broker=True)
    assert str(exc.value).startswith("configuration error: ")
    assert message in str(exc.value)


def test_a_controller_may_name_the_brokers_listener() -> None:
    # inter.broker.listener.name is the brokers' listener a controller dials, not its own.
    s = settings("inter.broker.listener.name=INTERNAL")
    keys = ("minibroker.controller.listeners", "minibroker.controller.advertised.listeners")
    check_listeners(s, *keys, broker=False)


def test_check_prints_the_resolved_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert print_check("broker", settings("replica.lag.time.max.ms=4000")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["program"] == "broker" and out["profile"] == "demo"
    assert out["settings"]["replica.lag.time.max.ms"] == "4000"
