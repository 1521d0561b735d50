"""TLS contexts from Kafka's `ssl.*` settings (PEM files, see `certs`), and the principal a
peer's certificate stands for (Kafka's DefaultKafkaPrincipalBuilder: `User:` and the subject's
RFC 2253 distinguished name; `User:ANONYMOUS` without a certificate)."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

ANONYMOUS = "User:ANONYMOUS"
CLIENT_AUTH = ("none", "requested", "required")  # ssl.client.auth


class TlsConfigError(ValueError):
    """A TLS setting that cannot be used; the message says which file or value."""


def _load_chain(ctx: ssl.SSLContext, keystore: str) -> None:
    if not Path(keystore).is_file():
        raise TlsConfigError(f"ssl.keystore.location {keystore!r} is not a file")
    try:
        ctx.load_cert_chain(keystore)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"ssl.keystore.location {keystore!r}: {exc}") from None


def _load_trust(ctx: ssl.SSLContext, truststore: str) -> None:
    if not Path(truststore).is_file():
        raise TlsConfigError(f"ssl.truststore.location {truststore!r} is not a file")
    try:
        ctx.load_verify_locations(truststore)
    except (ssl.SSLError, OSError) as exc:
        raise TlsConfigError(f"ssl.truststore.location {truststore!r}: {exc}") from None


def server_context(keystore: str, truststore: str, client_auth: str) -> ssl.SSLContext:
    """A listener's context: its certificate, and client certificates checked against the
    truststore when `client_auth` is requested or required."""
    if client_auth not in CLIENT_AUTH:
        raise TlsConfigError(f"ssl.client.auth must be one of {', '.join(CLIENT_AUTH)}")
    if not keystore:
        raise TlsConfigError("an SSL or SASL_SSL listener needs ssl.keystore.location")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    _load_chain(ctx, keystore)
    if client_auth != "none":
        if not truststore:
            raise TlsConfigError(f"ssl.client.auth={client_auth} needs ssl.truststore.location")
        _load_trust(ctx, truststore)
        ctx.verify_mode = ssl.CERT_REQUIRED if client_auth == "required" else ssl.CERT_OPTIONAL
    return ctx


def client_context(truststore: str, keystore: str = "") -> ssl.SSLContext:
    """A client's context: the servers' CA, and its own certificate for mutual TLS."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    if truststore:
        _load_trust(ctx, truststore)
    else:
        ctx.load_default_certs()
    if keystore:
        _load_chain(ctx, keystore)
    return ctx


def _rfc2253(subject: Any) -> str:
    """`getpeercert()`'s subject (RDNs from least to most specific) as RFC 2253 text."""
    short = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O",
             "countryName": "C", "localityName": "L", "stateOrProvinceName": "ST"}  # fmt: skip
    parts = []
    for rdn in reversed(subject or ()):
        parts.append("+".join(f"{short.get(k, k)}={_escape(v)}" for k, v in rdn))
    return ",".join(parts)


def _escape(value: str) -> str:
    out = "".join(f"\\{c}" if c in ',+"\\<>;=' else c for c in value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    return out[:-1] + "\\ " if out.endswith(" ") else out


def peer_dn(ssl_object: ssl.SSLObject | ssl.SSLSocket | None) -> str | None:
    """The RFC 2253 subject of a verified peer certificate (None without one)."""
    if ssl_object is None:
        return None
    cert = ssl_object.getpeercert()
    if not cert:
        return None
    return _rfc2253(cert.get("subject"))
