"""Security on the brokers' Kafka listeners (issue 28), with unmodified Kafka clients against a
`cluster up --secure` cluster: SASL_SSL with SCRAM, SSL with a client certificate, ACLs with
Kafka's errors and nothing written on a denial, a revoked ACL on a connected client's next
request. Kafka's own tests these follow: SaslScramSslEndToEndAuthorizationTest,
EndToEndAuthorizationTest, AuthorizerIntegrationTest, SslEndToEndAuthorizationTest."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import ssl
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from minibroker.security.client_config import ClientSecurity, read_properties
from tests.integration.conftest import Cluster, cluster_with_zk

pytestmark = pytest.mark.integration

DEADLINE_S = 20.0
# How long an ACL change may take to reach every broker (ZooKeeper watch, then one read).
ACL_PROPAGATION_BOUND_S = 10.0


@pytest.fixture(scope="module")
def sc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("secure") / "cluster"
    # No 3 s wait for more members: every group here has one consumer.
    delay = "group.initial.rebalance.delay.ms=0"
    with cluster_with_zk(
        d, "--brokers", "2", "--controllers", "1", "--secure", "--set", delay
    ) as c:
        yield c


def bootstrap(c: Cluster, tls: bool = False) -> str:
    brokers = c.state.by_role("broker")
    return ",".join(f"127.0.0.1:{p.kafka_tls_port if tls else p.kafka_port}" for p in brokers)


def admin_security(c: Cluster) -> ClientSecurity:
    config = c.state.admin_client_config
    assert config is not None, "not a --secure cluster"
    return read_properties(Path(config))


def test_status_names_the_admin_client_config(sc: Cluster) -> None:
    status = sc.status()
    assert status["secure"] and status["admin_client_config"] == sc.state.admin_client_config
    assert (sc.dir / "admin.properties").stat().st_mode & 0o777 == 0o600
    assert (sc.dir / "security" / "ca.key").stat().st_mode & 0o777 == 0o600
    assert all(p["kafka_tls_port"] for p in status["processes"] if p["role"] == "broker")


def user_security(c: Cluster, user: str, mechanism: str = "SCRAM-SHA-256") -> ClientSecurity:
    ca = admin_security(c).ca_file
    return ClientSecurity("SASL_SSL", mechanism, user, f"{user}-pw", ca)


def add_user(c: Cluster, user: str) -> ClientSecurity:
    c.cli("users", "add", user, "--password", f"{user}-pw")
    return user_security(c, user)


def admin_client(c: Cluster) -> AdminClient:
    return AdminClient({"bootstrap.servers": bootstrap(c), **admin_security(c).confluent()})


def create_topic(c: Cluster, topic: str, partitions: int = 1) -> None:
    client = admin_client(c)  # held until the futures resolve: it dies with its last reference
    futures = client.create_topics([NewTopic(topic, partitions, 2)])
    for f in futures.values():
        f.result(DEADLINE_S)


def produce(
    c: Cluster, security: ClientSecurity, topic: str, values: list[bytes], timeout_ms: int = 8000
) -> list[Any]:
    """Each value's delivery error (None when acknowledged)."""
    p = Producer(
        {
            "bootstrap.servers": bootstrap(c),
            **security.confluent(),
            "message.timeout.ms": timeout_ms,
        }
    )
    errors: list[Any] = []
    for v in values:
        p.produce(topic, v, callback=lambda err, _msg: errors.append(err))
    p.flush(DEADLINE_S)
    return errors


def high_watermark(c: Cluster, topic: str, partition: int = 0) -> int:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap(c), **admin_security(c).confluent(), "group.id": "hw"}
    )
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, partition), 10)[1])
    finally:
        consumer.close()


def consume(
    c: Cluster, security: ClientSecurity, topic: str, group: str, count: int, tls: bool = False
) -> tuple[list[bytes], list[Any]]:
    """(values read, errors seen) until `count` values or a fatal error or the deadline."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap(c, tls),
            **security.confluent(),
            "group.id": group,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    values: list[bytes] = []
    errors: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(values) < count and not errors and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None:
                continue
            if m.error():
                errors.append(m.error())
            else:
                values.append(m.value() or b"")
    finally:
        consumer.close()
    return values, errors


def test_sasl_ssl_scram_sha_512_producer_and_client_certificate_consumer(sc: Cluster) -> None:
    """The admin (SCRAM-SHA-512 over SASL_SSL) creates a topic and produces idempotently;
    a consumer with the admin's client certificate reads it over SSL."""
    create_topic(sc, "secured")
    admin = admin_security(sc)
    assert admin.protocol == "SASL_SSL" and admin.mechanism == "SCRAM-SHA-512"
    values = [f"v{i}".encode() for i in range(20)]
    assert produce(sc, admin, "secured", values) == [None] * 20
    ssl_admin = read_properties(sc.dir / "admin-ssl.properties")
    got, errors = consume(sc, ssl_admin, "secured", "cert-group", 20, tls=True)
    assert errors == [] and got == values


def test_produce_without_write_is_refused_and_nothing_is_written(sc: Cluster) -> None:
    create_topic(sc, "no-write")
    carol = add_user(sc, "carol")
    errors = produce(sc, carol, "no-write", [b"x", b"y"], timeout_ms=2000)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_AUTHORIZATION_FAILED] * 2
    assert high_watermark(sc, "no-write") == 0
    denied = [e for e in sc.log_events("broker-1") + sc.log_events("broker-2")
              if e.get("event") == "authorization_denied"]  # fmt: skip
    # librdkafka learns it from Metadata (Describe) and then sends no Produce at all.
    assert any(e["principal"] == "User:carol" and e["resource"] == "Topic:no-write"
               for e in denied)  # fmt: skip


def test_acls_grant_then_revocation_reaches_a_connected_producer(sc: Cluster) -> None:
    """An ACL added with the CLI (ZooKeeper) lets dave produce; removed, dave's next produce
    on the same connection fails within ACL_PROPAGATION_BOUND_S."""
    create_topic(sc, "revoke")
    dave = add_user(sc, "dave")
    sc.cli("acls", "add", "--allow-principal", "User:dave", "--producer", "--topic", "revoke")
    p = Producer({"bootstrap.servers": bootstrap(sc), **dave.confluent(),
                  "message.timeout.ms": 3000})  # fmt: skip
    errors: list[Any] = []
    deadline = time.monotonic() + ACL_PROPAGATION_BOUND_S
    while True:  # the brokers follow the change notification
        errors.clear()
        p.produce("revoke", b"allowed", callback=lambda err, _m: errors.append(err))
        p.flush(DEADLINE_S)
        if errors == [None] or time.monotonic() > deadline:
            break
    assert errors == [None]
    before = high_watermark(sc, "revoke")
    sc.cli("acls", "remove", "--allow-principal", "User:dave", "--operation", "Write",
           "--topic", "revoke")  # fmt: skip
    revoked_at = time.monotonic()
    accepted = 0  # produced before the brokers read the change: the notification is
    # asynchronous, as Kafka's (AclAuthorizer's change listener); one, or a few on a busy machine
    while time.monotonic() - revoked_at < ACL_PROPAGATION_BOUND_S:
        errors.clear()
        p.produce("revoke", b"after", callback=lambda err, _m: errors.append(err))
        p.flush(DEADLINE_S)
        if errors and errors[0] is not None:
            break
        accepted += errors == [None]
    assert errors and errors[0] is not None
    assert errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # Every acknowledged record is in the log and the refused one is not; once refused, refused.
    assert high_watermark(sc, "revoke") == before + accepted
    errors.clear()
    try:  # librdkafka may refuse it at once: the topic's last answer was the refusal
        p.produce("revoke", b"refused", callback=lambda err, _m: errors.append(err))
        p.flush(DEADLINE_S)
    except KafkaException as exc:
        errors.append(exc.args[0])
    assert [e.code() for e in errors if e is not None] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert high_watermark(sc, "revoke") == before + accepted


def test_consume_needs_read_on_the_topic_and_on_the_group(sc: Cluster) -> None:
    create_topic(sc, "readable")
    assert produce(sc, admin_security(sc), "readable", [b"a", b"b"]) == [None, None]
    erin = add_user(sc, "erin")
    sc.cli("acls", "add", "--allow-principal", "User:erin", "--operation", "Read",
           "--topic", "readable")  # fmt: skip
    _, errors = consume(sc, erin, "readable", "erins-group", 2)
    assert errors and errors[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    sc.cli("acls", "add", "--allow-principal", "User:erin", "--operation", "Read",
           "--group", "erins-group")  # fmt: skip
    got, errors = consume(sc, erin, "readable", "erins-group", 2)
    assert errors == [] and got == [b"a", b"b"]
    frank = add_user(sc, "frank")
    sc.cli("acls", "add", "--allow-principal", "User:frank", "--operation", "Read",
           "--group", "franks-group")  # fmt: skip
    _, errors = consume(sc, frank, "readable", "franks-group", 1)
    assert errors and errors[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_admin_operations_need_the_cluster_permission(sc: Cluster) -> None:
    """AuthorizerIntegrationTest: create topics and ACLs without CREATE/ALTER on the Cluster."""
    grace = add_user(sc, "grace")
    client = AdminClient({"bootstrap.servers": bootstrap(sc), **grace.confluent()})
    topic = f"t-{uuid.uuid4().hex[:6]}"
    with pytest.raises(Exception, match="TOPIC_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        client.create_topics([NewTopic(topic, 1, 1)])[topic].result(DEADLINE_S)
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        ResourcePatternType,
        ResourceType,
    )

    binding = AclBinding(ResourceType.TOPIC, "x", ResourcePatternType.LITERAL, "User:grace",
                         "*", AclOperation.READ, AclPermissionType.ALLOW)  # fmt: skip
    with pytest.raises(Exception, match="CLUSTER_AUTHORIZATION_FAILED|[Aa]uthoriz"):
        client.create_acls([binding])[binding].result(DEADLINE_S)
    assert json.loads(sc.cli("acls", "list", "--topic", "x", "--json").stdout) == []


def test_wrong_password_fails_authentication(sc: Cluster) -> None:
    add_user(sc, "heidi")
    wrong = ClientSecurity(
        "SASL_SSL", "SCRAM-SHA-512", "heidi", "not-it", admin_security(sc).ca_file
    )
    errors = produce(sc, wrong, "no-such-topic", [b"x"], timeout_ms=2000)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError._AUTHENTICATION, KafkaError._MSG_TIMED_OUT)


def test_aiokafka_over_ssl_with_a_client_certificate(sc: Cluster) -> None:
    from aiokafka import AIOKafkaProducer

    create_topic(sc, "aio")
    ssl_admin = read_properties(sc.dir / "admin-ssl.properties")
    context = ssl.create_default_context(cafile=ssl_admin.ca_file)
    context.load_cert_chain(ssl_admin.keystore)

    async def run() -> Any:
        producer = AIOKafkaProducer(
            bootstrap_servers=bootstrap(sc, tls=True), security_protocol="SSL",
            ssl_context=context,
        )  # fmt: skip
        await producer.start()
        try:
            return await producer.send_and_wait("aio", b"from-aiokafka")
        finally:
            await producer.stop()

    metadata = asyncio.run(run())
    assert metadata.offset >= 0


def test_tls_garbage_and_certificateless_clients_are_refused(sc: Cluster) -> None:
    """Random bytes, a plaintext Kafka request and a TLS client without a certificate on the
    SSL listener: each connection closed; the broker keeps serving."""
    seed = int(os.environ.get("MINIBROKER_SEED", random.randrange(1 << 30)))
    print(f"seed {seed} (rerun: MINIBROKER_SEED={seed})")
    rng = random.Random(seed)
    port = sc.state.by_role("broker")[0].kafka_tls_port
    payloads = [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 2000))) for _ in range(8)]
    payloads.append(struct.pack(">ihhi", 8, 18, 0, 1))  # ApiVersions in the clear
    for payload in payloads:
        with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as s:
            s.settimeout(DEADLINE_S)
            s.sendall(payload)
            with contextlib.suppress(ConnectionResetError):
                while s.recv(65536):
                    pass
    context = ssl.create_default_context(cafile=admin_security(sc).ca_file)
    assert _refused_without_a_certificate(context, port)
    create_topic(sc, "after-garbage")
    assert produce(sc, admin_security(sc), "after-garbage", [b"ok"]) == [None]


def _refused_without_a_certificate(context: ssl.SSLContext, port: int) -> bool:
    """Whether the SSL listener refuses a TLS client that has no certificate (in the
    handshake, or with TLS 1.3 at the first read after it)."""
    with socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S) as raw:
        try:
            with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                tls.sendall(struct.pack(">ihhi", 8, 18, 0, 1))
                return tls.recv(1) == b""
        except (ssl.SSLError, ConnectionResetError):
            return True


def test_unauthenticated_zookeeper_writes_are_refused(sc: Cluster) -> None:
    """ZkAuthorizationTest: with zookeeper.set.acl, a session without the cluster's login
    reads the cluster's state but writes nothing, and cannot read SCRAM credentials."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import NoAuthError

    sc.cli("topics", "create", "zk-acl", "--partitions", "1", "--replication-factor", "2",
           "--wait")  # fmt: skip
    stranger = KazooClient(sc.state.zk_connect)
    stranger.start(timeout=DEADLINE_S)
    try:
        writes = [
            lambda: stranger.create("/brokers/ids/99", b"{}"),
            lambda: stranger.set("/controller_epoch", b"99"),
            lambda: stranger.delete("/brokers/topics/zk-acl/partitions/0/state"),
            lambda: stranger.create("/kafka-acl/Topic/zk-acl", b"{}"),
            lambda: stranger.create("/config/changes/config_change_", b"{}", sequence=True),
            lambda: stranger.create("/admin/delete_topics/zk-acl", b""),
            lambda: stranger.get("/config/users/admin"),
        ]
        for attempt in writes:
            with pytest.raises(NoAuthError):
                attempt()  # type: ignore[no-untyped-call]
        assert stranger.get("/brokers/topics/zk-acl")[0]  # world-readable state
        acls = stranger.get_acls("/brokers/topics/zk-acl")[0]
        assert {(a.id.scheme, a.perms) for a in acls} == {("digest", 31), ("world", 1)}
    finally:
        stranger.stop()
        stranger.close()


def test_transactions_need_write_on_the_transactional_id(sc: Cluster) -> None:
    """KafkaApis: InitProducerId, AddPartitionsToTxn, EndTxn and a transactional Produce need
    WRITE on the TransactionalId; without it TRANSACTIONAL_ID_AUTHORIZATION_FAILED (fatal)."""
    create_topic(sc, "txn-acl")
    gina = add_user(sc, "gina")
    sc.cli("acls", "add", "--allow-principal", "User:gina", "--producer", "--topic", "txn-acl")
    config = {"bootstrap.servers": bootstrap(sc), **gina.confluent()}
    refused = Producer({**config, "transactional.id": "gina-tx"})
    with pytest.raises(KafkaException) as exc:
        refused.init_transactions(DEADLINE_S)
    assert exc.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    sc.cli("acls", "add", "--allow-principal", "User:gina", "--producer", "--topic", "txn-acl",
           "--transactional-id", "gina-tx")  # fmt: skip
    deadline = time.monotonic() + ACL_PROPAGATION_BOUND_S
    while True:  # the brokers follow the change notification
        allowed = Producer({**config, "transactional.id": "gina-tx"})
        try:
            allowed.init_transactions(DEADLINE_S)
            break
        except KafkaException:
            assert time.monotonic() < deadline, "the TransactionalId ACL never took effect"
    allowed.begin_transaction()
    allowed.produce("txn-acl", b"in a transaction")
    allowed.commit_transaction(DEADLINE_S)
    assert high_watermark(sc, "txn-acl") == 2  # the record and its COMMIT marker


def test_a_broker_with_set_acl_and_no_zookeeper_login_refuses_to_start(
    sc: Cluster, tmp_path: Path
) -> None:
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-m", "broker", "--id", "99", "--log-dir", str(tmp_path / "logs"),
         "--zk", sc.state.zk_connect, "--set", "zookeeper.set.acl=true"],
        capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL, check=False,
    )  # fmt: skip
    assert result.returncode != 0
    assert "zookeeper.set.acl is true, but no ZooKeeper login" in result.stderr
    assert sc.zk.exists("/brokers/ids/99") is None


def test_the_load_generator_verifies_every_record_on_the_secure_cluster(
    sc: Cluster, tmp_path: Path
) -> None:
    """Spark tasks write with kafka-python through the SASL_SSL listener as the admin
    (`--protocol kafka`: the cluster's admin.properties, SCRAM-SHA-512) and read back over
    gRPC with mutual TLS with the admin's certificate (inherited from the environment); a
    partition's leader is SIGKILLed mid-run, and verification finds every acknowledged record.
    Last in this module: it restarts the broker it killed."""
    import subprocess
    import sys

    out = tmp_path / "run"
    done = subprocess.run(
        # 12 s of load: a Spark that starts late catches up in a burst, and the kill 1 s
        # after the first records must still fall inside the load.
        [sys.executable, "-m", "loadgen", "--rate", "500", "--duration", "12s",
         "--master", "local[2]", "--dir", str(sc.dir), "--topic", "lg-secure",
         "--partitions", "2", "--replication-factor", "2", "--min-insync", "1",
         "--out", str(out), "--fault", "at=1s kill leader:lg-secure-0",
         "--protocol", "kafka"],
        capture_output=True, text=True, timeout=600, check=False, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    report = json.loads((out / "report.json").read_text())
    assert report["run"]["protocol"] == "kafka"
    assert [f["error"] for f in report["faults"]] == [None], report["faults"]
    v = report["verification"]
    assert v["ok"] and v["missing"] == 0 and v["acked"] > 0, v
    # Two brokers, min.insync.replicas 1: the survivor leads on and acknowledges.
    assert report["totals"]["acked"] > report["totals"]["failed"], report["totals"]
    for broker in sc.reload().by_role("broker"):
        sc.cli("cluster", "start", broker.name, check=False)
