"""Listeners (KIP-103): parsing, what is advertised, which endpoint a peer picks."""

from __future__ import annotations

import pytest

from minibroker.core.listeners import (
    Endpoint,
    ListenerError,
    advertised_endpoints,
    from_strings,
    parse_listeners,
    pick,
    pick_kafka,
    security_protocol_map,
)
from minibroker.core.zk_layout import ControllerEndpointZNode, ZNodeFormatError

TWO = "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:19091"


def test_parse_listeners_keeps_order_and_names() -> None:
    assert parse_listeners(TWO) == (
        Endpoint("INTERNAL", "0.0.0.0", 9092),
        Endpoint("EXTERNAL", "0.0.0.0", 19091),
    )
    assert str(Endpoint("PLAINTEXT", "::1", 9)) == "PLAINTEXT://[::1]:9"
    assert Endpoint("PLAINTEXT", "::1", 9).address == "[::1]:9"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "no listener"),
        ("A://h:1,A://h:2", "appears twice"),
        ("h:1", "LISTENER://host:port"),
        ("A://h:x", "LISTENER://host:port"),
    ],
)
def test_bad_listeners_say_why(value: str, message: str) -> None:
    with pytest.raises(ListenerError, match=message):
        parse_listeners(value)


def test_advertised_defaults_to_listeners_with_bound_ports() -> None:
    listeners = parse_listeners("PLAINTEXT://127.0.0.1:0")
    assert advertised_endpoints(listeners, "", {"PLAINTEXT": 4242}) == (
        Endpoint("PLAINTEXT", "127.0.0.1", 4242),
    )


def test_advertised_order_is_kept_and_names_must_be_listeners() -> None:
    listeners = parse_listeners(TWO)
    got = advertised_endpoints(
        listeners,
        "EXTERNAL://127.0.0.1:19091,INTERNAL://broker-1:9092",
        {"INTERNAL": 9092, "EXTERNAL": 19091},
    )
    assert [str(e) for e in got] == ["EXTERNAL://127.0.0.1:19091", "INTERNAL://broker-1:9092"]
    with pytest.raises(ListenerError, match="not one of listeners"):
        advertised_endpoints(listeners, "OTHER://h:1", {})


def test_a_wildcard_address_cannot_be_advertised() -> None:
    with pytest.raises(ListenerError, match="cannot advertise"):
        advertised_endpoints(parse_listeners(TWO), "", {"INTERNAL": 1, "EXTERNAL": 2})


def test_pick_by_name_else_plaintext_else_first() -> None:
    eps = from_strings(["EXTERNAL://127.0.0.1:1", "INTERNAL://b:2"])
    assert pick(eps, "INTERNAL") == Endpoint("INTERNAL", "b", 2)
    assert pick(eps, "MISSING") is None
    assert pick(eps) == Endpoint("EXTERNAL", "127.0.0.1", 1)
    with_plaintext = from_strings(["A://a:1", "PLAINTEXT://p:2"])
    assert pick(with_plaintext) == Endpoint("PLAINTEXT", "p", 2)
    assert pick(()) is None


def test_kafka_clients_pick_the_kafka_listener_beside_their_grpc_one() -> None:
    compose = from_strings(
        [
            "EXTERNAL://127.0.0.1:19001",
            "INTERNAL://broker-1:9091",
            "KAFKA_EXTERNAL://127.0.0.1:9092",
            "KAFKA_INTERNAL://broker-1:29092",
        ]
    )
    assert pick_kafka(compose, "INTERNAL") == Endpoint("KAFKA_INTERNAL", "broker-1", 29092)
    assert pick_kafka(compose, "EXTERNAL") == Endpoint("KAFKA_EXTERNAL", "127.0.0.1", 9092)
    assert pick_kafka(compose, "KAFKA_INTERNAL") == Endpoint("KAFKA_INTERNAL", "broker-1", 29092)
    assert pick_kafka(compose) == Endpoint("KAFKA_EXTERNAL", "127.0.0.1", 9092)
    process = from_strings(["PLAINTEXT://127.0.0.1:5001", "KAFKA://127.0.0.1:5002"])
    assert pick_kafka(process, "PLAINTEXT") == Endpoint("KAFKA", "127.0.0.1", 5002)
    assert pick_kafka(from_strings(["PLAINTEXT://127.0.0.1:5001"])) is None
    assert pick(process) == Endpoint("PLAINTEXT", "127.0.0.1", 5001)  # gRPC never picks KAFKA


def test_security_protocol_map_needs_every_listener_and_plaintext_for_grpc() -> None:
    listeners = parse_listeners(TWO)
    assert security_protocol_map("INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT", listeners) == {
        "INTERNAL": "PLAINTEXT",
        "EXTERNAL": "PLAINTEXT",
    }
    with pytest.raises(ListenerError, match="no entry for listener 'EXTERNAL'"):
        security_protocol_map("INTERNAL:PLAINTEXT", listeners)
    with pytest.raises(ListenerError, match="speaks gRPC"):
        security_protocol_map("INTERNAL:SASL_SSL,EXTERNAL:PLAINTEXT", listeners)
    assert security_protocol_map("INTERNAL:SSL,EXTERNAL:PLAINTEXT", listeners)["INTERNAL"] == "SSL"
    with pytest.raises(ListenerError, match="NAME:PROTOCOL"):
        security_protocol_map("INTERNAL:TLS,EXTERNAL:PLAINTEXT", listeners)
    kafka = parse_listeners("KAFKA://127.0.0.1:0,KAFKA_TLS://127.0.0.1:0,PLAINTEXT://h:1")
    assert security_protocol_map(
        "KAFKA:SASL_PLAINTEXT,KAFKA_TLS:SASL_SSL,PLAINTEXT:PLAINTEXT", kafka
    ) == {"KAFKA": "SASL_PLAINTEXT", "KAFKA_TLS": "SASL_SSL", "PLAINTEXT": "PLAINTEXT"}


def test_controller_endpoint_znode_round_trips_and_reads_version_1() -> None:
    eps = ("EXTERNAL://127.0.0.1:19191", "INTERNAL://controller-1:9190")
    data = ControllerEndpointZNode.encode(eps)
    assert data == (
        b'{"version":2,"endpoints":["EXTERNAL://127.0.0.1:19191","INTERNAL://controller-1:9190"]}'
    )
    assert ControllerEndpointZNode.decode(data) == eps
    old = b'{"version":1,"host":"127.0.0.1","port":7}'
    assert ControllerEndpointZNode.decode(old) == ("PLAINTEXT://127.0.0.1:7",)
    with pytest.raises(ZNodeFormatError):
        ControllerEndpointZNode.decode(b'{"version":2,"endpoints":[]}')
    with pytest.raises(ZNodeFormatError):
        ControllerEndpointZNode.decode(b'{"version":2,"endpoints":["nope"]}')
