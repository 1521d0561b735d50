"""Kafka client property files (`--command-config`, `DIR/admin.properties`): written so that a
Java client (`sasl.jaas.config`, `ssl.truststore.*`) and librdkafka (`sasl.username`,
`sasl.password`, `ssl.ca.location`) both read them, read back as a dict of properties, and
turned into the settings of the clients the tests and tools use. Files holding a password or
a key are 0600."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from minibroker.runtime.settings import parse_properties

SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


@dataclass(frozen=True)
class ClientSecurity:
    """What a client needs to reach a secured Kafka listener."""

    protocol: str = "PLAINTEXT"  # security.protocol
    mechanism: str = ""  # sasl.mechanism
    username: str = ""
    password: str = ""
    ca_file: str = ""  # the CA to trust (PEM)
    keystore: str = ""  # a PEM with the client's key and certificate (SSL client auth)

    def properties(self) -> dict[str, str]:
        props = {"security.protocol": self.protocol}
        if self.mechanism:
            module = PLAIN_LOGIN if self.mechanism == "PLAIN" else SCRAM_LOGIN
            props.update(
                {
                    "sasl.mechanism": self.mechanism,
                    "sasl.jaas.config": f'{module} required username="{self.username}" '
                    f'password="{self.password}";',
                    "sasl.username": self.username,
                    "sasl.password": self.password,
                }
            )
        if self.ca_file:
            props.update(
                {
                    "ssl.ca.location": self.ca_file,
                    "ssl.truststore.type": "PEM",
                    "ssl.truststore.location": self.ca_file,
                    # Certificates name 127.0.0.1 and localhost: host names are checked.
                    "ssl.endpoint.identification.algorithm": "https",
                }
            )
        if self.keystore:
            props.update(
                {
                    "ssl.certificate.location": self.keystore,
                    "ssl.key.location": self.keystore,
                    "ssl.keystore.type": "PEM",
                    "ssl.keystore.location": self.keystore,
                }
            )
        return props

    def confluent(self) -> dict[str, str]:
        """confluent-kafka (librdkafka) settings."""
        keep = (
            "security.protocol", "sasl.mechanism", "sasl.username", "sasl.password",
            "ssl.ca.location", "ssl.certificate.location", "ssl.key.location",
        )  # fmt: skip
        return {k: v for k, v in self.properties().items() if k in keep}

    def kafka_python(self) -> dict[str, str]:
        """kafka-python / aiokafka keyword arguments (aiokafka wants an ssl_context instead of
        the ssl_* files)."""
        out = {"security_protocol": self.protocol}
        if self.mechanism:
            out.update(
                sasl_mechanism=self.mechanism,
                sasl_plain_username=self.username,
                sasl_plain_password=self.password,
            )
        if self.ca_file:
            out["ssl_cafile"] = self.ca_file
        if self.keystore:
            out.update(ssl_certfile=self.keystore, ssl_keyfile=self.keystore)
        return out


def write_properties(path: Path, security: ClientSecurity) -> Path:
    lines = [f"{k}={v}" for k, v in security.properties().items()]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("# Kafka client settings (Java clients and librdkafka read this file)\n")
        f.write("\n".join(lines) + "\n")
    return path


def read_properties(path: Path) -> ClientSecurity:
    """A client property file as Kafka's tools read `--command-config`; ValueError names
    what is missing."""
    props = parse_properties(path.read_text())
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    username = props.get("sasl.username", "")
    password = props.get("sasl.password", "")
    jaas = props.get("sasl.jaas.config", "")
    if jaas and not username:
        username = _jaas_option(jaas, "username")
        password = _jaas_option(jaas, "password")
    mechanism = props.get("sasl.mechanism", "GSSAPI" if protocol.startswith("SASL") else "")
    if protocol.startswith("SASL") and not username:
        raise ValueError(f"{path}: a SASL protocol needs sasl.username or sasl.jaas.config")
    return ClientSecurity(
        protocol=protocol,
        mechanism=mechanism if protocol.startswith("SASL") else "",
        username=username,
        password=password,
        ca_file=props.get("ssl.ca.location", props.get("ssl.truststore.location", "")),
        keystore=props.get("ssl.certificate.location", props.get("ssl.keystore.location", "")),
    )


def _jaas_option(jaas: str, name: str) -> str:
    marker = f'{name}="'
    start = jaas.find(marker)
    if start < 0:
        return ""
    end = jaas.find('"', start + len(marker))
    return jaas[start + len(marker) : end if end >= 0 else None]
