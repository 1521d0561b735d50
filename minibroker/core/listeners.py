"""Kafka's listeners (KIP-103): named endpoints "NAME://host:port", the advertised ones brokers
register, and which one a peer uses. A client gets the endpoints of the listener it connected
on; brokers and controllers reach brokers on `inter.broker.listener.name` (reference §1.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from minibroker.core.zk_layout import ZNodeFormatError, parse_endpoint

WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})
KAFKA_LISTENER = "KAFKA"


class ListenerError(ValueError):
    """A listeners setting that cannot be used; the message says which and why."""


@dataclass(frozen=True)
class Endpoint:
    listener: str
    host: str
    port: int

    @property
    def address(self) -> str:
        """host:port for a gRPC target (IPv6 hosts bracketed)."""
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.listener}://{host}:{self.port}"


def parse_listeners(value: str, setting: str = "listeners") -> tuple[Endpoint, ...]:
    """Every endpoint of a comma-separated listeners value; names must be distinct."""
    out: list[Endpoint] = []
    for part in (p for p in value.split(",") if p.strip()):
        try:
            name, host, port = parse_endpoint(part)
        except ZNodeFormatError as exc:
            raise ListenerError(f"{setting}: {exc}") from None
        if any(e.listener == name for e in out):
            raise ListenerError(f"{setting}: listener {name!r} appears twice in {value!r}")
        out.append(Endpoint(name, host, port))
    if not out:
        raise ListenerError(f"{setting}: no listener in {value!r}")
    return tuple(out)


def advertised_endpoints(
    listeners: Sequence[Endpoint], advertised: str, bound_ports: Mapping[str, int]
) -> tuple[Endpoint, ...]:
    """What a server publishes: `advertised` (in its order) or else its listeners; port 0 means
    the port actually bound. A wildcard bind address cannot be advertised (Kafka refuses too)."""
    names = {e.listener for e in listeners}
    chosen = parse_listeners(advertised, "advertised.listeners") if advertised else tuple(listeners)
    out = []
    for e in chosen:
        if e.listener not in names:
            raise ListenerError(
                f"advertised.listeners: {e.listener!r} is not one of listeners "
                f"({', '.join(sorted(names))})"
            )
        if e.host in WILDCARD_HOSTS:
            raise ListenerError(
                f"cannot advertise {e}: set advertised.listeners to an address others can reach"
            )
        out.append(Endpoint(e.listener, e.host, e.port or bound_ports[e.listener]))
    return tuple(out)


def speaks_kafka(listener: str) -> bool:
    """Whether a broker's listener speaks Kafka's wire protocol instead of gRPC: one named
    KAFKA or KAFKA_<something> (say KAFKA_INTERNAL and KAFKA_EXTERNAL in containers)."""
    return listener == KAFKA_LISTENER or listener.startswith(KAFKA_LISTENER + "_")


def pick(endpoints: Iterable[Endpoint], listener: str = "") -> Endpoint | None:
    """The endpoint of `listener`; with no name, PLAINTEXT if there is one, else the first gRPC
    one (gRPC clients never pick a Kafka-protocol listener by themselves)."""
    eps = list(endpoints)
    if listener:
        return next((e for e in eps if e.listener == listener), None)
    grpc_eps = [e for e in eps if not speaks_kafka(e.listener)]
    return next(
        (e for e in grpc_eps if e.listener == "PLAINTEXT"), grpc_eps[0] if grpc_eps else None
    )


def pick_kafka(endpoints: Iterable[Endpoint], listener: str = "") -> Endpoint | None:
    """The Kafka-protocol endpoint beside gRPC listener `listener` (KAFKA_INTERNAL for
    INTERNAL); with no name, or none such, the first Kafka-protocol endpoint."""
    kafka_eps = [e for e in endpoints if speaks_kafka(e.listener)]
    if listener:
        paired = f"{KAFKA_LISTENER}_{listener}"
        match = next((e for e in kafka_eps if e.listener in (listener, paired)), None)
        if match is not None:
            return match
    return kafka_eps[0] if kafka_eps else None


def from_strings(endpoints: Iterable[str]) -> tuple[Endpoint, ...]:
    """Endpoints from their "NAME://host:port" strings (a registration's `endpoints`)."""
    return tuple(Endpoint(*parse_endpoint(s)) for s in endpoints)


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def security_protocol_map(value: str, listeners: Iterable[Endpoint]) -> dict[str, str]:
    """`listener.security.protocol.map` for these listeners; every listener needs an entry
    (as in Kafka). A Kafka listener may use any of Kafka's four protocols; a gRPC listener
    PLAINTEXT or SSL (gRPC over TLS; it has no SASL)."""
    mapping: dict[str, str] = {}
    for part in (p for p in value.split(",") if p.strip()):
        name, sep, protocol = part.strip().partition(":")
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise ListenerError(
                f"listener.security.protocol.map: {part.strip()!r} must be NAME:PROTOCOL with "
                f"PROTOCOL one of {', '.join(SECURITY_PROTOCOLS)}"
            )
        mapping[name] = protocol
    out = {}
    for e in listeners:
        if e.listener not in mapping:
            raise ListenerError(
                f"listener.security.protocol.map has no entry for listener {e.listener!r}"
            )
        protocol = mapping[e.listener]
        if uses_sasl(protocol) and not speaks_kafka(e.listener):
            raise ListenerError(
                f"listener {e.listener!r} speaks gRPC: its protocol must be PLAINTEXT or SSL "
                f"(got {protocol}); SASL is for KAFKA* listeners"
            )
        out[e.listener] = protocol
    return out


def uses_tls(protocol: str) -> bool:
    return protocol in ("SSL", "SASL_SSL")


def uses_sasl(protocol: str) -> bool:
    return protocol in ("SASL_PLAINTEXT", "SASL_SSL")
