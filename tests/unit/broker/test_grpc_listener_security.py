"""Which gRPC listener settings a broker refuses to start with (broker/security/setup.py): gRPC
cannot ask for an optional client certificate, and nodes prove who they are by certificate on
the inter-broker listener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from broker.security.setup import BrokerSecurity, SecurityConfigError
from minibroker.runtime import grpc_security
from minibroker.runtime.settings import Settings
from minibroker.security.certs import CA_CERT, make_node_cert


@pytest.fixture
def security(tmp_path: Path) -> Iterator[Any]:
    cert = make_node_cert(tmp_path, "broker-1", "broker")

    def make(*overrides: str) -> BrokerSecurity:
        files = [
            f"ssl.keystore.location={cert.path}",
            f"ssl.truststore.location={tmp_path / CA_CERT}",
        ]
        settings = Settings.load(environ={}, overrides=["broker.id=1", *files, *overrides])
        return BrokerSecurity(settings, {"PLAINTEXT": "SSL", "TOKEN": "SSL"})

    yield make
    grpc_security.configure_client(None)  # BrokerSecurity configured this process's channels


def test_requested_client_certificates_are_refused_on_a_grpc_listener(security: Any) -> None:
    with pytest.raises(SecurityConfigError, match="gRPC listener TOKEN: ssl.client.auth=requested"):
        security("ssl.client.auth=required", "listener.name.token.ssl.client.auth=requested")


def test_the_inter_broker_grpc_listener_must_require_certificates(security: Any) -> None:
    with pytest.raises(SecurityConfigError, match="inter.broker.listener.name"):
        security("ssl.client.auth=none")


def test_a_certificate_less_listener_beside_a_mutual_tls_one(security: Any) -> None:
    """The TOKEN listener of a `cluster up --secure` broker: TLS without certificates, its
    calls still checked (a token's user, else User:ANONYMOUS), its token gate in front."""
    s = security("ssl.client.auth=required", "listener.name.token.ssl.client.auth=none")
    assert s.grpc_client_auth == {"PLAINTEXT": True, "TOKEN": False}
    assert s.grpc_peers("TOKEN").enforced and s.grpc_peers("PLAINTEXT").enforced
    assert len(s.grpc_interceptors("TOKEN")) == 1
