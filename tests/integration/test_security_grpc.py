"""Security on the brokers' gRPC listeners and a seeded hostile barrage on every listener of a
`cluster up --secure` cluster (issue 28): Kafka's CLUSTER_ACTION by certificate (control
requests only from a controller, a follower fetch only from that broker), client calls
authorized as their certificate's principal, and garbage, requests before authentication,
malformed and replayed SASL tokens, oversized frames and forged node requests thrown at the
SASL_SSL, SSL and gRPC listeners of both brokers: each refused, every broker alive and serving,
nothing written."""

from __future__ import annotations

import json
import os
import random
import socket
import ssl
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kafka.protocol.metadata.metadata import MetadataRequest
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from minibroker.core.errors import ErrorCode
from minibroker.core.security.scram import ScramClient, ScramMechanism
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import closed_by_broker, read_frame, request_bytes

pytestmark = pytest.mark.integration

DEADLINE_S = 20.0
ACL_PROPAGATION_BOUND_S = 10.0
SEED = int(os.environ.get("MINIBROKER_SEED", random.randrange(1 << 30)))
BARRAGE_ROUNDS = 100
BARRAGE_LIMIT_S = 60.0


@pytest.fixture(scope="module")
def gc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("secure-grpc") / "cluster"
    with cluster_with_zk(d, "--brokers", "2", "--controllers", "1", "--secure") as c:
        yield c


def grpc_channel(gc: Cluster, broker: str, cert: str | None) -> Any:
    import grpc

    from minibroker.runtime.grpc_security import TlsFiles

    sec = gc.dir / "security"
    address = gc.state.process(broker).address
    if cert is None:  # TLS without a client certificate
        creds = grpc.ssl_channel_credentials(root_certificates=(sec / "ca.pem").read_bytes())
    else:
        creds = TlsFiles(str(sec / "ca.pem"), str(sec / f"{cert}.pem")).channel_credentials()
    return grpc.secure_channel(address, creds)


def test_grpc_control_and_follower_fetches_need_the_right_certificate(gc: Cluster) -> None:
    """Kafka's CLUSTER_ACTION by certificate: LeaderAndIsr from a broker's certificate and a
    follower fetch with the admin's (a client) are refused; nothing moves."""
    import grpc

    from minibroker.rpc import (
        broker_pb2,
        broker_pb2_grpc,
        control_pb2,
        control_pb2_grpc,
        errors_pb2,
    )

    gc.cli("topics", "create", "forged", "--partitions", "1", "--replication-factor", "2",
           "--wait")  # fmt: skip
    (row,) = json.loads(gc.cli("topics", "describe", "forged", "--json").stdout)
    leader = f"broker-{row['leader']}"
    follower_id = next(r for r in row["replicas"] if r != row["leader"])
    with grpc_channel(gc, leader, "admin") as channel:
        fetch = broker_pb2.FetchRequest(replica_id=follower_id, max_wait_ms=0, min_bytes=0,
                                        max_bytes=1 << 20)  # fmt: skip
        t = fetch.topics.add(topic="forged")
        t.partitions.add(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)
        answer = broker_pb2_grpc.BrokerStub(channel).Fetch(fetch, timeout=DEADLINE_S)
        (part,) = answer.responses[0].partitions
        assert part.error_code == errors_pb2.TOPIC_AUTHORIZATION_FAILED and not part.records
    other = next(f"broker-{r}" for r in row["replicas"] if r != row["leader"])
    with grpc_channel(gc, leader, other) as channel:
        lai = control_pb2.LeaderAndIsrRequest(controller_id=101, controller_epoch=99)
        ts = lai.topic_states.add(topic_name="forged")
        ts.partition_states.add(
            partition_index=0, controller_epoch=99, leader=follower_id, leader_epoch=99,
            isr=[follower_id], replicas=row["replicas"],
        )  # fmt: skip
        refused = control_pb2_grpc.ControlStub(channel).LeaderAndIsr(lai, timeout=DEADLINE_S)
        assert refused.error_code == errors_pb2.CLUSTER_AUTHORIZATION_FAILED
    with grpc_channel(gc, leader, None) as channel, pytest.raises(grpc.RpcError):
        broker_pb2_grpc.BrokerStub(channel).Fetch(broker_pb2.FetchRequest(), timeout=DEADLINE_S)
    (after,) = json.loads(gc.cli("topics", "describe", "forged", "--json").stdout)
    assert (after["leader"], after["leader_epoch"]) == (row["leader"], row["leader_epoch"])


def test_grpc_clients_are_authorized_as_their_certificate(gc: Cluster) -> None:
    """`minibroker certs carol`: a client certificate of the cluster's CA, principal
    User:carol. Over gRPC she sees no topic she may not describe, cannot list offsets or
    produce there, nor describe a broker; an ACL (Describe) makes the topic visible."""
    from minibroker.rpc import broker_pb2, broker_pb2_grpc, errors_pb2

    gc.cli("certs", "carol-cert")
    gc.cli("topics", "create", "grpc-acl", "--partitions", "1", "--replication-factor", "2",
           "--wait")  # fmt: skip
    broker = gc.state.by_role("broker")[0].name
    with grpc_channel(gc, broker, "carol-cert") as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        listing = stub.Metadata(broker_pb2.MetadataRequest(), timeout=DEADLINE_S)
        assert "grpc-acl" not in {t.name for t in listing.topics}
        named = stub.Metadata(broker_pb2.MetadataRequest(topics=["grpc-acl"]), timeout=DEADLINE_S)
        assert named.topics[0].error_code == errors_pb2.TOPIC_AUTHORIZATION_FAILED
        offsets = broker_pb2.ListOffsetsRequest()
        offsets.topics.add(name="grpc-acl").partitions.add(partition_index=0, timestamp=-1)
        answer = stub.ListOffsets(offsets, timeout=DEADLINE_S)
        assert answer.topics[0].partitions[0].error_code == errors_pb2.TOPIC_AUTHORIZATION_FAILED
        described = stub.DescribeBroker(broker_pb2.DescribeBrokerRequest(), timeout=DEADLINE_S)
        assert described.error_code == errors_pb2.CLUSTER_AUTHORIZATION_FAILED
        gc.cli("acls", "add", "--allow-principal", "User:carol-cert", "--operation", "Describe",
               "--topic", "grpc-acl")  # fmt: skip

        def visible() -> bool:
            got = stub.Metadata(broker_pb2.MetadataRequest(), timeout=DEADLINE_S)
            return "grpc-acl" in {t.name for t in got.topics}

        wait_until(visible, timeout_s=ACL_PROPAGATION_BOUND_S, what="the ACL to reach the broker")


# ---- the barrage -------------------------------------------------------------------------


class Barrage:
    """One attack a round, chosen by a seeded generator, against one of the brokers' three
    listeners (KAFKA: SASL_SSL, KAFKA_SSL: SSL with client certificates, gRPC: TLS with client
    certificates). Each attack asserts its own refusal."""

    def __init__(self, c: Cluster, rng: random.Random) -> None:
        self.c, self.rng = c, rng
        sec = c.dir / "security"
        self.ca = str(sec / "ca.pem")
        self.tls = ssl.create_default_context(cafile=self.ca)
        self.brokers = c.reload().by_role("broker")
        self.recorded: list[bytes] = []  # a successful SCRAM exchange's client messages

    # -- sockets

    def _raw(self, port: int) -> socket.socket:
        s = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE_S)
        s.settimeout(DEADLINE_S)
        return s

    def _sasl_ssl(self) -> ssl.SSLSocket:
        port = self.rng.choice(self.brokers).kafka_port
        return self.tls.wrap_socket(self._raw(port), server_hostname="127.0.0.1")

    def _garbage(self) -> bytes:
        return bytes(self.rng.randrange(256) for _ in range(self.rng.randrange(1, 3000)))

    def _handshake(self, s: ssl.SSLSocket, mechanism: str) -> Any:
        s.sendall(request_bytes(SaslHandshakeRequest(mechanism=mechanism), 1))
        return SaslHandshakeResponse.decode(read_frame(s), version=1, header=True, framed=True)

    def _authenticate(self, s: ssl.SSLSocket, token: bytes) -> Any:
        s.sendall(request_bytes(SaslAuthenticateRequest(auth_bytes=token), 1))
        return SaslAuthenticateResponse.decode(read_frame(s), version=1, header=True, framed=True)

    # -- attacks on the Kafka listeners

    def garbage_in_the_clear(self) -> None:
        b = self.rng.choice(self.brokers)
        port = self.rng.choice([b.kafka_port, b.kafka_tls_port, int(b.address.split(":")[1])])
        s = self._raw(int(port))
        s.sendall(self._garbage())
        assert closed_by_broker(s)

    def garbage_inside_tls(self) -> None:
        s = self._sasl_ssl()
        s.sendall(self._garbage())
        assert closed_by_broker(s)

    def request_before_authentication(self) -> None:
        s = self._sasl_ssl()
        s.sendall(request_bytes(MetadataRequest[1](topics=None), 1))
        assert closed_by_broker(s)

    def unsupported_mechanism(self) -> None:
        s = self._sasl_ssl()
        answer = self._handshake(s, self.rng.choice(["GSSAPI", "OAUTHBEARER", "X" * 300]))
        assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert closed_by_broker(s)

    def malformed_token(self) -> None:
        s = self._sasl_ssl()
        mechanism = self.rng.choice(["SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"])
        assert self._handshake(s, mechanism).error_code == 0
        token = self._garbage()[:400]
        answer = self._authenticate(s, token)
        if answer.error_code == 0:  # a first message that parses: a final that cannot
            answer = self._authenticate(s, b"c=biws,r=x,p=" + token[:8].hex().encode())
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert closed_by_broker(s)

    def replayed_scram(self) -> None:
        if not self.recorded:
            s = self._sasl_ssl()
            assert self._handshake(s, "SCRAM-SHA-256").error_code == 0
            client = ScramClient(ScramMechanism.SCRAM_SHA_256, "mallory", "mallory-pw", "seen")
            first = client.first()
            final = client.final(bytes(self._authenticate(s, first).auth_bytes))
            assert self._authenticate(s, final).error_code == 0
            s.close()
            self.recorded = [first, final]
        s = self._sasl_ssl()
        assert self._handshake(s, "SCRAM-SHA-256").error_code == 0
        assert self._authenticate(s, self.recorded[0]).error_code == 0
        answer = self._authenticate(s, self.recorded[1])
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert closed_by_broker(s)

    def oversized_frame(self) -> None:
        s = self._sasl_ssl()
        s.sendall(struct.pack(">i", self.rng.randrange(524_289, 1 << 30)) + b"\0" * 100)
        assert closed_by_broker(s)

    def certificateless_ssl_client(self) -> None:
        port = self.rng.choice(self.brokers).kafka_tls_port
        refused = False
        try:
            with self.tls.wrap_socket(self._raw(port), server_hostname="127.0.0.1") as s:
                s.sendall(request_bytes(MetadataRequest[1](topics=None), 1))
                refused = s.recv(1) == b""
        except (ssl.SSLError, ConnectionResetError):
            refused = True
        assert refused

    # -- attacks on the gRPC listeners

    def _stub(self, cert: str | None, broker: str | None = None) -> tuple[Any, Any]:
        from minibroker.rpc import broker_pb2_grpc, control_pb2_grpc

        name = broker or self.rng.choice(self.brokers).name
        channel = grpc_channel(self.c, name, cert)
        return channel, (broker_pb2_grpc.BrokerStub(channel), control_pb2_grpc.ControlStub(channel))

    def grpc_without_a_certificate(self) -> None:
        import grpc

        from minibroker.rpc import broker_pb2

        channel, (broker, _) = self._stub(None)
        with channel, pytest.raises(grpc.RpcError):
            broker.Metadata(broker_pb2.MetadataRequest(), timeout=DEADLINE_S)

    def grpc_forged_control_request(self) -> None:
        from minibroker.rpc import control_pb2, errors_pb2

        channel, (_, control) = self._stub(self.rng.choice(["mallory", "broker-1", "admin"]))
        requests: list[Callable[[], Any]] = [
            lambda: control.LeaderAndIsr(
                control_pb2.LeaderAndIsrRequest(controller_id=101, controller_epoch=99),
                timeout=DEADLINE_S,
            ),
            lambda: control.StopReplica(
                control_pb2.StopReplicaRequest(controller_id=101, controller_epoch=99),
                timeout=DEADLINE_S,
            ),
            lambda: control.UpdateMetadata(
                control_pb2.UpdateMetadataRequest(controller_id=101, controller_epoch=99),
                timeout=DEADLINE_S,
            ),
        ]
        request = self.rng.choice(requests)
        with channel:
            assert request().error_code == errors_pb2.CLUSTER_AUTHORIZATION_FAILED

    def grpc_forged_follower_fetch(self) -> None:
        from minibroker.rpc import broker_pb2, errors_pb2

        channel, (broker, _) = self._stub(self.rng.choice(["mallory", "admin", "controller-1"]))
        fetch = broker_pb2.FetchRequest(replica_id=self.rng.choice([1, 2]), max_bytes=1 << 20)
        fetch.topics.add(topic="canary").partitions.add(
            partition=0, fetch_offset=0, partition_max_bytes=1 << 20
        )
        with channel:
            answer = broker.Fetch(fetch, timeout=DEADLINE_S)
        for t in answer.responses:
            for p in t.partitions:
                assert p.error_code != errors_pb2.NONE and not p.records

    def grpc_produce_without_write(self) -> None:
        import grpc

        from minibroker.rpc import broker_pb2, errors_pb2

        channel, (broker, _) = self._stub("mallory")
        size = self.rng.choice([10, 1000, 5 << 20])  # the last over gRPC's 4 MiB limit
        request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=1000)
        request.topics.add(name="canary").partitions.add(
            partition_index=0, records=os.urandom(size)
        )
        with channel:
            try:
                answer = broker.Produce(request, timeout=DEADLINE_S)
            except grpc.RpcError as exc:
                assert exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and size > 4 << 20
                return
        for t in answer.responses:
            for p in t.partitions:
                assert p.error_code == errors_pb2.TOPIC_AUTHORIZATION_FAILED

    def attacks(self) -> list[Callable[[], None]]:
        return [
            self.garbage_in_the_clear, self.garbage_inside_tls,
            self.request_before_authentication, self.unsupported_mechanism,
            self.malformed_token, self.replayed_scram, self.oversized_frame,
            self.certificateless_ssl_client, self.grpc_without_a_certificate,
            self.grpc_forged_control_request, self.grpc_forged_follower_fetch,
            self.grpc_produce_without_write,
        ]  # fmt: skip


def test_a_seeded_barrage_on_every_listener_is_refused_and_writes_nothing(gc: Cluster) -> None:
    """SaslServerAuthenticatorTest's and AuthorizerIntegrationTest's refusals, many at once:
    BARRAGE_ROUNDS attacks (at most BARRAGE_LIMIT_S), each refused; then every broker is
    alive and serves the admin, the canary topic's log did not move, and no request failed
    inside a broker."""
    print(f"seed {SEED} (rerun: MINIBROKER_SEED={SEED})")
    gc.cli("users", "add", "mallory", "--password", "mallory-pw")
    gc.cli("certs", "mallory")
    gc.cli("topics", "create", "canary", "--partitions", "1", "--replication-factor", "2",
           "--wait")  # fmt: skip
    before = log_ends(gc, "canary")
    barrage = Barrage(gc, random.Random(SEED))
    attacks = barrage.attacks()
    started = time.monotonic()
    done: list[str] = []
    for _ in range(BARRAGE_ROUNDS):
        if time.monotonic() - started > BARRAGE_LIMIT_S:
            break
        attack = barrage.rng.choice(attacks)
        attack()
        done.append(attack.__name__)
    assert len(done) >= BARRAGE_ROUNDS // 2, f"only {len(done)} rounds in {BARRAGE_LIMIT_S} s"
    brokers = [p for p in gc.status()["processes"] if p["role"] == "broker"]
    assert [p["state"] for p in brokers] == ["running", "running"], brokers
    assert log_ends(gc, "canary") == before
    produced = subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", "produce", "canary", "--dir", str(gc.dir)],
        input="after the barrage\n", capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    wait_until(lambda: log_ends(gc, "canary") != before, timeout_s=DEADLINE_S,
               what="the admin's record appended after the barrage")  # fmt: skip
    failed = [e for b in ("broker-1", "broker-2") for e in gc.log_events(b)
              if e.get("event") == "request_failed"]  # fmt: skip
    assert failed == [], failed[:3]
    print(f"barrage: {len(done)} attacks in {time.monotonic() - started:.1f} s: "
          f"{sorted(set(done))}")  # fmt: skip


def log_ends(c: Cluster, topic: str) -> list[int]:
    rows = json.loads(c.cli("topics", "describe", topic, "--json").stdout)
    return [int(r["log_end_offset"]) for row in rows for r in row["replicas_state"]]
