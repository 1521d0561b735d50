"""Kafka client property files and the cluster CA (minibroker/security)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from minibroker.security.certs import make_node_cert
from minibroker.security.client_config import ClientSecurity, read_properties, write_properties
from minibroker.security.tls import TlsConfigError, client_context, server_context


def test_properties_round_trip_and_are_private(tmp_path: Path) -> None:
    sec = ClientSecurity("SASL_SSL", "SCRAM-SHA-512", "admin", "p=w;d", "/ca.pem")
    path = write_properties(tmp_path / "admin.properties", sec)
    assert path.stat().st_mode & 0o777 == 0o600
    text = path.read_text()
    assert 'ScramLoginModule required username="admin" password="p=w;d";' in text
    assert "sasl.username=admin" in text and "ssl.ca.location=/ca.pem" in text
    assert read_properties(path) == sec


def test_a_java_only_file_is_read_from_its_jaas_config(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="alice" password="secret";\n'
    )
    sec = read_properties(path)
    assert (sec.protocol, sec.mechanism, sec.username, sec.password) == (
        "SASL_PLAINTEXT", "PLAIN", "alice", "secret",
    )  # fmt: skip
    assert sec.kafka_python()["sasl_plain_password"] == "secret"


def test_sasl_without_credentials_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bad.properties"
    path.write_text("security.protocol=SASL_SSL\n")
    with pytest.raises(ValueError, match="sasl.username"):
        read_properties(path)


def test_node_certificates_make_working_tls_contexts(tmp_path: Path) -> None:
    broker = make_node_cert(tmp_path, "broker-1", "broker")
    client = make_node_cert(tmp_path, "alice", "client")
    assert broker.path.stat().st_mode & 0o777 == 0o600
    assert client.principal == "User:CN=alice,OU=client,O=minibroker"
    server = server_context(str(broker.path), str(tmp_path / "ca.pem"), "required")
    assert server.verify_mode == ssl.CERT_REQUIRED
    client_context(str(tmp_path / "ca.pem"), str(client.path))
    with pytest.raises(TlsConfigError, match="ssl.keystore.location"):
        server_context(str(tmp_path / "missing.pem"), "", "none")
    with pytest.raises(TlsConfigError, match="ssl.client.auth"):
        server_context(str(broker.path), "", "sometimes")
