"""TLS on the gRPC listeners, for the whole process (as a Kafka node has one keystore): a
server's credentials from its `ssl.*` settings, and the credentials every channel this process
opens uses. A process without them dials in the clear (a plaintext cluster).

Servers: a gRPC listener mapped to SSL in `listener.security.protocol.map` speaks TLS and, with
`ssl.client.auth=required`, accepts only peers with a certificate of the cluster's CA. Who the
peer is (its certificate's CN and OU: `broker-2`/`broker`, `controller-1`/`controller`,
`admin`/`client`) is read by `peer_identity` for the servicers' checks.

Clients: brokers and controllers use their own keystore; tools take the --dir cluster's admin
certificate or $MINIBROKER_TLS_CA and $MINIBROKER_TLS_CERT (a PEM with key and chain), which the
load generator's Spark workers inherit; or, given SASL client properties and no certificate, no
certificate and a SCRAM login's token (configure_token_client)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from minibroker.runtime.grpc_token_login import SaslLogin, TokenCredentials

ENV_CA = "MINIBROKER_TLS_CA"
ENV_CERT = "MINIBROKER_TLS_CERT"


class GrpcTlsError(ValueError):
    pass


def _read(path: str, what: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise GrpcTlsError(f"{what} {path!r}: {exc.strerror}") from None


def _split_pem(pem: bytes) -> tuple[bytes, bytes]:
    """(private key, certificate chain) of a PEM holding both (certs.make_node_cert's)."""
    key_start = pem.find(b"-----BEGIN PRIVATE KEY-----")
    key_end = pem.find(b"-----END PRIVATE KEY-----")
    if key_start < 0 or key_end < 0:
        raise GrpcTlsError("the PEM holds no PKCS#8 private key")
    key_end += len(b"-----END PRIVATE KEY-----\n")
    chain = pem[:key_start] + pem[key_end:]
    if b"BEGIN CERTIFICATE" not in chain:
        raise GrpcTlsError("the PEM holds no certificate")
    return pem[key_start:key_end], chain


@dataclass(frozen=True)
class TlsFiles:
    ca_file: str
    keystore: str  # PEM: private key + certificate chain

    def server_credentials(self, require_client_auth: bool) -> grpc.ServerCredentials:
        key, chain = _split_pem(_read(self.keystore, "ssl.keystore.location"))
        return grpc.ssl_server_credentials(
            [(key, chain)],
            root_certificates=_read(self.ca_file, "ssl.truststore.location"),
            require_client_auth=require_client_auth,
        )

    def channel_credentials(self) -> grpc.ChannelCredentials:
        key, chain = _split_pem(_read(self.keystore, "the client certificate"))
        return grpc.ssl_channel_credentials(
            root_certificates=_read(self.ca_file, "the CA file"),
            private_key=key,
            certificate_chain=chain,
        )


_client: grpc.ChannelCredentials | None = None
_configured = False


def configure_client(files: TlsFiles | None) -> None:
    """Every channel this process opens from now on uses TLS with these files (None: none)."""
    global _client, _configured
    _client = None if files is None else files.channel_credentials()
    _configured = True


def configure_token_client(ca_file: str, who: SaslLogin) -> None:
    """Every channel this process opens from now on uses TLS without a certificate and logs
    in as `who` (grpc_token_login): for a listener with `ssl.client.auth=none`."""
    global _client, _configured
    ca = _read(ca_file, "the CA file")
    _client = grpc.composite_channel_credentials(
        grpc.ssl_channel_credentials(root_certificates=ca),
        grpc.metadata_call_credentials(TokenCredentials(who, ca), name="scram-token"),
    )
    _configured = True


def _credentials() -> grpc.ChannelCredentials | None:
    """The process's channel credentials; a process nobody configured (a Spark worker)
    takes $MINIBROKER_TLS_CA and $MINIBROKER_TLS_CERT, once."""
    if not _configured and not configure_client_from_env():
        configure_client(None)
    return _client


def configure_client_from_env() -> bool:
    ca, cert = os.environ.get(ENV_CA), os.environ.get(ENV_CERT)
    if ca and cert:
        configure_client(TlsFiles(ca, cert))
        return True
    return False


def client_tls() -> bool:
    return _credentials() is not None


def aio_channel(address: str, options: Any = None) -> grpc.aio.Channel:
    """A grpc.aio channel to `address`: TLS when the process is configured for it."""
    creds = _credentials()
    if creds is None:
        return grpc.aio.insecure_channel(address, options=options)
    return grpc.aio.secure_channel(address, creds, options=options)


def sync_channel(address: str, options: Any = None) -> grpc.Channel:
    creds = _credentials()
    if creds is None:
        return grpc.insecure_channel(address, options=options)
    return grpc.secure_channel(address, creds, options=options)


@dataclass(frozen=True)
class PeerIdentity:
    """The peer's certificate: its common name and organizational unit (role)."""

    common_name: str
    role: str

    @property
    def principal(self) -> str:
        return f"User:{self.common_name}"


def peer_identity(context: Any) -> PeerIdentity | None:
    """Who called (a ServicerContext of a TLS listener); None in the clear or without a
    certificate."""
    try:
        auth = context.auth_context()
    except Exception:  # noqa: BLE001 - a context without auth (tests, plaintext)
        return None
    subjects = auth.get("x509_subject") or []
    names = auth.get("x509_common_name") or []
    if not subjects or not names:
        return None
    subject = subjects[0].decode(errors="replace")
    role = ""
    for part in subject.replace("/", ",").split(","):
        key, _, value = part.strip().partition("=")
        if key == "OU":
            role = value
    return PeerIdentity(names[0].decode(errors="replace"), role)
