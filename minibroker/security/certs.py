"""`minibroker certs`: a cluster's own certificate authority and one certificate per node
(brokers, controllers, the admin, named clients), made with `cryptography`.

Files in the directory given: `ca.pem` (the CA certificate, what clients trust), `ca.key`, and
for each node `<name>.pem` holding its private key and certificate chain (what
`ssl.keystore.location` names; Kafka 2.6 reads JKS/PKCS12 stores, minibroker reads PEM, as
Kafka 2.7's `ssl.keystore.type=PEM` does). Keys are written 0600. A node's subject is
`CN=<name>,OU=<role>,O=minibroker`, so its SSL principal is `User:CN=<name>,OU=<role>,O=minibroker`
(Kafka's default principal builder: the RFC 2253 distinguished name)."""

from __future__ import annotations

import datetime
import ipaddress
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT = "ca.pem"
CA_KEY = "ca.key"
VALID_DAYS = 825
ORGANIZATION = "minibroker"


@dataclass(frozen=True)
class NodeCert:
    name: str
    role: str  # broker, controller, client
    path: Path

    @property
    def principal(self) -> str:
        return f"User:{subject_dn(self.name, self.role)}"


def subject_dn(name: str, role: str) -> str:
    """The RFC 2253 form Python's and Java's TLS report (most specific first)."""
    return f"CN={name},OU={role},O={ORGANIZATION}"


def _name(common_name: str, role: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, ORGANIZATION),
            x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, role),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _write_private(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def ensure_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """The directory's CA, made on first use."""
    directory.mkdir(parents=True, exist_ok=True)
    cert_path, key_path = directory / CA_CERT, directory / CA_KEY
    if cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise ValueError(f"{key_path} is not an EC private key made by minibroker certs")
        return cert, key
    key = ec.generate_private_key(ec.SECP256R1())
    name = _name("minibroker CA", "ca")
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )  # fmt: skip
        .sign(key, hashes.SHA256())
    )
    _write_private(key_path, _key_pem(key))
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def make_node_cert(
    directory: Path, name: str, role: str, hosts: Iterable[str] = ("localhost", "127.0.0.1")
) -> NodeCert:
    """`<name>.pem` (key + certificate + CA), signed by the directory's CA; valid as a TLS
    server and client for `hosts` (DNS names or IP addresses)."""
    ca_cert, ca_key = ensure_ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    sans: list[x509.GeneralName] = []
    for host in dict.fromkeys(hosts):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(name, role))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    path = directory / f"{name}.pem"
    pem = cert.public_bytes(serialization.Encoding.PEM)
    _write_private(path, _key_pem(key) + pem + ca_cert.public_bytes(serialization.Encoding.PEM))
    return NodeCert(name, role, path)
