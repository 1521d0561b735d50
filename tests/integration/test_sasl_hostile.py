"""SASL on a SASL_PLAINTEXT Kafka listener (issue 28): kafka-python with PLAIN and SCRAM, and
hostile input before authentication (SaslServerAuthenticatorTest's cases): requests before the
handshake, an unsupported mechanism, malformed and replayed SCRAM tokens (seeded), an oversized
handshake. Each is refused with Kafka's answer or a closed connection; the broker keeps
serving, no handler failed and nothing was written."""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from minibroker.core.errors import ErrorCode
from minibroker.core.security.scram import ScramClient, ScramMechanism
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import (
    closed_by_broker,
    kafka_bootstrap,
    read_frame,
    request_bytes,
)

pytestmark = pytest.mark.integration

DEADLINE_S = 10.0
SEED = int(os.environ.get("MINIBROKER_SEED", random.randrange(1 << 30)))
SETTINGS = (
    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,KAFKA:SASL_PLAINTEXT",
    "authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
    "super.users=User:admin",
    "group.initial.rebalance.delay.ms=0",
)


@pytest.fixture(scope="module")
def sp(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("sasl-plaintext") / "cluster"
    args = [a for s in SETTINGS for a in ("--set", s)]
    with cluster_with_zk(d, "--brokers", "1", "--controllers", "1", *args) as c:
        c.cli("users", "add", "admin", "--password", "admin-pw")
        c.cli("users", "add", "ivan", "--password", "ivan-pw")
        c.cli("topics", "create", "plain", "--partitions", "1", "--replication-factor", "1",
              "--wait")  # fmt: skip
        # kafka-python's producer is idempotent: IdempotentWrite on the Cluster (Kafka 2.6).
        c.cli("acls", "add", "--allow-principal", "User:ivan", "--producer", "--idempotent",
              "--consumer", "--topic", "plain", "--group", "ivans")  # fmt: skip
        yield c


def address(c: Cluster) -> tuple[str, int]:
    host, port = kafka_bootstrap(c).split(",")[0].split(":")
    return host, int(port)


def connect(c: Cluster) -> socket.socket:
    s = socket.create_connection(address(c), timeout=DEADLINE_S)
    s.settimeout(DEADLINE_S)
    return s


def handshake(s: socket.socket, mechanism: str, version: int = 1) -> Any:
    s.sendall(request_bytes(SaslHandshakeRequest(mechanism=mechanism), version))
    return SaslHandshakeResponse.decode(read_frame(s), version=version, header=True, framed=True)


def authenticate(s: socket.socket, token: bytes, version: int = 1) -> Any:
    s.sendall(request_bytes(SaslAuthenticateRequest(auth_bytes=token), version))
    return SaslAuthenticateResponse.decode(read_frame(s), version=version, header=True, framed=True)


def scram_login(s: socket.socket, user: str, password: str, nonce: str) -> list[bytes]:
    """A SCRAM-SHA-256 exchange; the client's tokens (for replaying)."""
    assert handshake(s, "SCRAM-SHA-256").error_code == 0
    client = ScramClient(ScramMechanism.SCRAM_SHA_256, user, password, nonce)
    first = client.first()
    answer = authenticate(s, first)
    assert answer.error_code == 0, answer.error_message
    final = client.final(bytes(answer.auth_bytes))
    done = authenticate(s, final)
    assert done.error_code == 0, done.error_message
    client.verify(bytes(done.auth_bytes))
    return [first, final]


def assert_broker_serves(c: Cluster) -> None:
    """A fresh client still logs in and is answered, and no handler failed."""
    s = connect(c)
    scram_login(s, "ivan", "ivan-pw", "check")
    s.sendall(request_bytes(ApiVersionsRequest(), 0, correlation_id=9))
    answer = ApiVersionsResponse.decode(read_frame(s), version=0, header=True, framed=True)
    s.close()
    assert answer.error_code == 0
    failed = [e for e in c.log_events("broker-1") if e.get("event") == "request_failed"]
    assert failed == []


def kafka_python(c: Cluster, mechanism: str, user: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap_servers": kafka_bootstrap(c),
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_kafka_python_produces_and_consumes_over_sasl_plaintext(
    sp: Cluster, mechanism: str
) -> None:
    config = kafka_python(sp, mechanism, "ivan", "ivan-pw")
    producer = KafkaProducer(**config, acks="all")
    values = [f"{mechanism}-{i}".encode() for i in range(10)]
    for v in values:
        producer.send("plain", v).get(DEADLINE_S)
    producer.close()
    consumer = KafkaConsumer("plain", **config, group_id="ivans", auto_offset_reset="earliest")
    got: list[bytes] = []
    deadline = time.monotonic() + DEADLINE_S * 2
    try:
        while not all(v in got for v in values) and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                got += [r.value for r in records]
    finally:
        consumer.close()
    assert all(v in got for v in values)


def test_a_wrong_password_is_sasl_authentication_failed(sp: Cluster) -> None:
    s = connect(sp)
    assert handshake(s, "PLAIN").error_code == 0
    answer = authenticate(s, b"\x00ivan\x00wrong")
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert "Invalid username or password" in answer.error_message
    assert closed_by_broker(s)


@pytest.mark.parametrize(
    "request_bytes",
    [
        request_bytes(MetadataRequest(topics=None), 1),
        struct.pack(">ihhi", 8, 0, 3, 1),  # a Produce header
        request_bytes(
            SaslAuthenticateRequest(auth_bytes=b"n,,n=ivan,r=x"), 1
        ),  # before a handshake
    ],
    ids=["metadata", "produce", "authenticate-first"],
)
def test_requests_before_authentication_close_the_connection(
    sp: Cluster, request_bytes: bytes
) -> None:
    s = connect(sp)
    s.sendall(request_bytes)
    assert closed_by_broker(s)
    assert_broker_serves(sp)


def test_an_unsupported_mechanism_is_answered_then_closed(sp: Cluster) -> None:
    """testUnsupportedMechanism: UNSUPPORTED_SASL_MECHANISM with the enabled ones, closed."""
    s = connect(sp)
    answer = handshake(s, "GSSAPI")
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert set(answer.mechanisms) == {"SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"}
    assert closed_by_broker(s)


def test_malformed_scram_and_plain_tokens_fail_and_close(sp: Cluster) -> None:
    rng = random.Random(SEED)
    print(f"seed {SEED} (rerun: MINIBROKER_SEED={SEED})")
    for i in range(20):
        mechanism = rng.choice(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
        token = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300)))
        if i % 3 == 0:  # a plausible start, then garbage
            token = b"n,,n=ivan,r=" + token
        s = connect(sp)
        assert handshake(s, mechanism).error_code == 0
        answer = authenticate(s, token)
        if answer.error_code == 0:  # a SCRAM first message that parses: break the final
            answer = authenticate(s, b"c=biws,r=wrong,p=" + token[:8].hex().encode())
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, (mechanism, token)
        assert closed_by_broker(s)
    assert_broker_serves(sp)


def test_a_replayed_scram_exchange_fails(sp: Cluster) -> None:
    """Tokens recorded from a successful login, sent again on a new connection: the server
    issues a new nonce, so the recorded final message cannot prove anything."""
    s = connect(sp)
    first, final = scram_login(s, "ivan", "ivan-pw", "recorded")
    s.close()
    replay = connect(sp)
    assert handshake(replay, "SCRAM-SHA-256").error_code == 0
    assert authenticate(replay, first).error_code == 0
    answer = authenticate(replay, final)
    assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert closed_by_broker(replay)


def test_an_oversized_frame_before_authentication_is_refused(sp: Cluster) -> None:
    """Over SaslServerAuthenticator.MAX_RECEIVE_SIZE (512 KiB) before login: closed unread."""
    s = connect(sp)
    s.sendall(struct.pack(">i", 600_000) + b"\x00" * 1000)
    assert closed_by_broker(s)
    assert_broker_serves(sp)


def test_handshake_after_authentication_is_illegal_sasl_state(sp: Cluster) -> None:
    s = connect(sp)
    scram_login(s, "ivan", "ivan-pw", "again")
    assert handshake(s, "PLAIN").error_code == ErrorCode.ILLEGAL_SASL_STATE
    s.close()


def test_denied_produce_from_a_raw_client_writes_nothing(sp: Cluster) -> None:
    """A user without WRITE: the Produce answer is TOPIC_AUTHORIZATION_FAILED, the log stays."""
    sp.cli("users", "add", "judy", "--password", "judy-pw")
    before = sp.cli("topics", "describe", "plain", "--json").stdout
    producer = KafkaProducer(
        **kafka_python(sp, "PLAIN", "judy", "judy-pw"), max_block_ms=3000,
        enable_idempotence=False,
    )  # fmt: skip
    try:
        with pytest.raises(KafkaError):
            producer.send("plain", b"nope").get(DEADLINE_S)
    finally:
        producer.close(timeout=5)
    after = sp.cli("topics", "describe", "plain", "--json").stdout
    assert _log_end(before) == _log_end(after)


def _log_end(describe_json: str) -> list[int]:
    """Every replica's log end offset in `topics describe --json`."""
    rows = json.loads(describe_json)
    return [int(r["log_end_offset"]) for row in rows for r in row["replicas_state"]]
