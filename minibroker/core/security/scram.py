"""SASL/SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802 / RFC 7677) as Kafka 2.6 speaks them, without
I/O: the stored credential in Kafka's text form (`ScramCredentialUtils`), its derivation
(`ScramFormatter`), the server's two-step exchange (`ScramSaslServer`) and a client for our own
tools and tests. Nonces are arguments, so every exchange replays exactly in a test.

Beyond Kafka 2.6: the server checks that the client's final nonce is the one it issued
(RFC 5802 §5.1 requires it; 2.6 relies on the proof alone), so a replayed final message fails
with a clear reason."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from minibroker.core.security.sasl import SaslAuthenticationFailed


class ScramMechanism(Enum):
    """Kafka's `ScramMechanism`: hash name and minimum iterations (4096 for both)."""

    SCRAM_SHA_256 = ("SCRAM-SHA-256", "sha256")
    SCRAM_SHA_512 = ("SCRAM-SHA-512", "sha512")

    @property
    def mechanism_name(self) -> str:
        return self.value[0]

    @property
    def hash_name(self) -> str:
        return self.value[1]

    @property
    def min_iterations(self) -> int:
        return 4096

    @classmethod
    def for_name(cls, name: str) -> ScramMechanism | None:
        return next((m for m in cls if m.mechanism_name == name), None)


DEFAULT_ITERATIONS = 4096  # kafka-configs' DefaultScramIterations (ConfigCommand.scala)


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def to_text(self) -> str:
        """Kafka's `credentialToString`: what `/config/users/<user>` holds per mechanism."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @staticmethod
    def from_text(text: str) -> ScramCredential:
        """Kafka's `credentialFromString`; ValueError when it is not exactly those four."""
        props: dict[str, str] = {}
        for token in text.split(","):
            key, eq, value = token.partition("=")
            if not key or not eq:
                raise ValueError("SCRAM credential: every field must be name=value")
            props[key] = value
        if set(props) != {"salt", "stored_key", "server_key", "iterations"}:
            raise ValueError("SCRAM credential: needs salt, stored_key, server_key, iterations")
        try:
            return ScramCredential(
                salt=base64.b64decode(props["salt"], validate=True),
                stored_key=base64.b64decode(props["stored_key"], validate=True),
                server_key=base64.b64decode(props["server_key"], validate=True),
                iterations=int(props["iterations"]),
            )
        except (binascii.Error, ValueError) as exc:
            raise ValueError(f"SCRAM credential: {exc}") from None


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802's Hi(): PBKDF2 with one block of the hash's size."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode(), salt, iterations)


def _hmac(mechanism: ScramMechanism, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, mechanism.hash_name).digest()


def _hash(mechanism: ScramMechanism, data: bytes) -> bytes:
    return hashlib.new(mechanism.hash_name, data).digest()


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


def make_credential(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int = DEFAULT_ITERATIONS
) -> ScramCredential:
    """`ScramFormatter.generateCredential` with the salt given (the caller draws it)."""
    if iterations < mechanism.min_iterations:
        raise ValueError(
            f"iterations {iterations} is less than the minimum {mechanism.min_iterations} "
            f"for {mechanism.mechanism_name}"
        )
    salted = salted_password(mechanism, password, salt, iterations)
    client_key = _hmac(mechanism, salted, b"Client Key")
    return ScramCredential(
        salt=salt,
        stored_key=_hash(mechanism, client_key),
        server_key=_hmac(mechanism, salted, b"Server Key"),
        iterations=iterations,
    )


def password_matches(mechanism: ScramMechanism, credential: ScramCredential, password: str) -> bool:
    """Whether `password` derives `credential` (constant-time compare of the stored key)."""
    salted = salted_password(mechanism, password, credential.salt, credential.iterations)
    stored = _hash(mechanism, _hmac(mechanism, salted, b"Client Key"))
    return hmac.compare_digest(stored, credential.stored_key)


# ScramMessages' patterns (ASCII only: Java's \x01-\x7F classes).
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"
_B64 = r"(?:[a-zA-Z0-9/+]{4})*(?:[a-zA-Z0-9/+]{3}=|[a-zA-Z0-9/+]{2}==)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?:m={_VALUE},)?n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_B64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),"
    rf"p=(?P<proof>{_B64})"
)
_SERVER_FIRST = re.compile(rf"r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_B64}),i=(?P<iterations>\d+)")
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>{_VALUE})|v=(?P<signature>{_B64}))")
GS2_HEADER_B64 = base64.b64encode(b"n,,").decode()  # "biws": no channel binding


def username_from_sasl_name(sasl_name: str) -> str:
    """ScramFormatter.username: =2C is ",", =3D is "=", any other "=" is invalid."""
    name = sasl_name.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise SaslAuthenticationFailed(f"invalid SCRAM username {sasl_name!r}")
    return name.replace("=3D", "=")


def sasl_name(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


def _decode(token: bytes, what: str) -> str:
    try:
        return token.decode("ascii")
    except UnicodeDecodeError:
        raise SaslAuthenticationFailed(f"invalid SCRAM {what}: not ASCII") from None


CredentialLookup = Callable[[str], ScramCredential | None]


class ScramServer:
    """One server side of one exchange: `evaluate(client_first)` → server-first,
    `evaluate(client_final)` → server-final; `complete` and `username` afterwards. Any fault
    raises SaslAuthenticationFailed and leaves the exchange failed for good."""

    def __init__(
        self, mechanism: ScramMechanism, lookup: CredentialLookup, server_nonce: str
    ) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce
        self._state = "first"
        self.username: str | None = None
        self._client_first_bare = ""
        self._server_first = ""
        self._credential: ScramCredential | None = None

    @property
    def complete(self) -> bool:
        return self._state == "complete"

    def evaluate(self, token: bytes) -> bytes:
        try:
            if self._state == "first":
                return self._first(_decode(token, "client first message"))
            if self._state == "final":
                return self._final(_decode(token, "client final message"))
            raise SaslAuthenticationFailed(f"unexpected SCRAM message in state {self._state}")
        except SaslAuthenticationFailed:
            self._state = "failed"
            self._credential = None
            raise

    def _first(self, message: str) -> bytes:
        m = _CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise SaslAuthenticationFailed("invalid SCRAM client first message format")
        username = username_from_sasl_name(m["saslname"])
        authzid = m["authzid"]
        if authzid and username_from_sasl_name(authzid) != username:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        credential = self._lookup(username)
        if credential is None:
            raise SaslAuthenticationFailed("Authentication failed: Invalid user credentials")
        if credential.iterations < self.mechanism.min_iterations:
            raise SaslAuthenticationFailed(
                f"Iterations {credential.iterations} is less than the minimum "
                f"{self.mechanism.min_iterations} for {self.mechanism.mechanism_name}"
            )
        self.username = username
        self._credential = credential
        self._client_first_bare = message[message.index("n=", 2) :]
        # ScramMessages.ServerFirstMessage: the combined nonce is client's + server's.
        nonce = m["nonce"] + self._server_nonce
        salt = base64.b64encode(credential.salt).decode()
        self._server_first = f"r={nonce},s={salt},i={credential.iterations}"
        self._state = "final"
        return self._server_first.encode()

    def _final(self, message: str) -> bytes:
        m = _CLIENT_FINAL.fullmatch(message)
        if m is None or self._credential is None:
            raise SaslAuthenticationFailed("invalid SCRAM client final message format")
        expected_nonce = _SERVER_FIRST.fullmatch(self._server_first)
        if expected_nonce is None or m["nonce"] != expected_nonce["nonce"]:
            raise SaslAuthenticationFailed("Invalid client nonce in the final client message")
        auth_message = (
            f"{self._client_first_bare},{self._server_first},{m['without_proof']}".encode()
        )
        proof = base64.b64decode(m["proof"])
        stored_key = self._credential.stored_key
        signature = _hmac(self.mechanism, stored_key, auth_message)
        if len(proof) != len(signature):
            raise SaslAuthenticationFailed("Invalid client credentials")
        computed = _hash(self.mechanism, _xor(signature, proof))
        if not hmac.compare_digest(computed, stored_key):
            raise SaslAuthenticationFailed("Invalid client credentials")
        server_signature = _hmac(self.mechanism, self._credential.server_key, auth_message)
        self._credential = None
        self._state = "complete"
        return f"v={base64.b64encode(server_signature).decode()}".encode()


class ScramClient:
    """The client side, for minibroker's own tools and the tests' hostile clients:
    `first()` → `final(server_first)` → `verify(server_final)`."""

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, client_nonce: str
    ) -> None:
        self.mechanism = mechanism
        self._password = password
        self._bare = f"n={sasl_name(username)},r={client_nonce}"
        self._client_nonce = client_nonce
        self._server_signature = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes) -> bytes:
        text = _decode(server_first, "server first message")
        m = _SERVER_FIRST.fullmatch(text)
        if m is None or not m["nonce"].startswith(self._client_nonce):
            raise SaslAuthenticationFailed("invalid SCRAM server first message")
        iterations = int(m["iterations"])
        salted = salted_password(
            self.mechanism, self._password, base64.b64decode(m["salt"]), iterations
        )
        without_proof = f"c={GS2_HEADER_B64},r={m['nonce']}"
        auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = _hmac(self.mechanism, salted, b"Client Key")
        signature = _hmac(self.mechanism, _hash(self.mechanism, client_key), auth_message)
        server_key = _hmac(self.mechanism, salted, b"Server Key")
        self._server_signature = _hmac(self.mechanism, server_key, auth_message)
        proof = base64.b64encode(_xor(client_key, signature)).decode()
        return f"{without_proof},p={proof}".encode()

    def verify(self, server_final: bytes) -> None:
        m = _SERVER_FINAL.fullmatch(_decode(server_final, "server final message"))
        if m is None or m["signature"] is None:
            raise SaslAuthenticationFailed("SCRAM server final message carries an error")
        if not hmac.compare_digest(base64.b64decode(m["signature"]), self._server_signature):
            raise SaslAuthenticationFailed("SCRAM server signature does not match")
