"""gRPC clients without a certificate (issue 28, section 2): on a `cluster up --secure` cluster a
client logs in with SCRAM or PLAIN on a broker's TOKEN listener (TLS, no client certificate) and
carries the token it gets; its calls are its user's, under the same ACLs as on the KAFKA
listener. Wrong passwords, unsupported mechanisms, forged tokens and the tokens of a deleted
user are refused with their reason, nothing written; a token never makes its holder a node."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.runtime.waiting import WaitTimeout, wait_until
from tests.integration.conftest import Cluster, cluster_with_zk

pytestmark = pytest.mark.integration

DEADLINE_S = 20.0
REVOCATION_BOUND_S = 10.0  # a deleted user's config change notification reaching every broker


@pytest.fixture(scope="module")
def tc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("secure-tokens") / "cluster"
    with cluster_with_zk(d, "--brokers", "2", "--controllers", "1", "--secure") as c:
        c.cli("topics", "create", "tokens", "--partitions", "2", "--replication-factor", "2",
              "--wait")  # fmt: skip
        yield c


def client_properties(tc: Cluster, user: str, password: str, mechanism: str) -> Path:
    path = tc.dir / f"{user}-{mechanism}.properties"
    path.write_text(
        "security.protocol=SASL_SSL\n"
        f"sasl.mechanism={mechanism}\n"
        f"sasl.username={user}\nsasl.password={password}\n"
        f"ssl.ca.location={tc.dir / 'security' / 'ca.pem'}\n"
    )
    return path


def tool(
    tc: Cluster, config: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """A minibroker tool run as the user of `config` (its token, on the TOKEN listener)."""
    return subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", *args, "--command-config", str(config),
         "--dir", str(tc.dir)],
        input=stdin, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip


def consume_all(tc: Cluster, config: Path | None = None) -> subprocess.CompletedProcess[str]:
    args = ["consume", "tokens", "--from-beginning", "--until-hw"]
    if config is None:
        return tc.cli(*args, check=False)
    return tool(tc, config, *args)


def token_channel(tc: Cluster, broker: str) -> Any:
    import grpc

    port = tc.state.process(broker).token_port
    ca = (tc.dir / "security" / "ca.pem").read_bytes()
    return grpc.secure_channel(f"127.0.0.1:{port}", grpc.ssl_channel_credentials(ca))


def login(tc: Cluster, broker: str, user: str, password: str, mechanism: str) -> Any:
    from minibroker.runtime.grpc_token_login import SaslLogin
    from minibroker.runtime.grpc_token_login import login as do_login

    with token_channel(tc, broker) as channel:
        return do_login(channel, SaslLogin(mechanism, user, password))


def test_a_scram_or_plain_login_is_its_users_principal_on_every_broker(tc: Cluster) -> None:
    """dave may write and describe `tokens`: his tools produce with a token from any of the
    three mechanisms; reading is refused (TOPIC_AUTHORIZATION_FAILED) until an ACL allows it."""
    tc.cli("users", "add", "dave", "--password", "dave-pw")
    tc.cli("acls", "add", "--allow-principal", "User:dave", "--operation", "Write",
           "--operation", "Describe", "--topic", "tokens")  # fmt: skip
    dave = client_properties(tc, "dave", "dave-pw", "SCRAM-SHA-512")
    done = tool(tc, dave, "produce", "tokens", stdin="by SCRAM-SHA-512\n")
    assert done.returncode == 0, done.stderr
    for mechanism in ("SCRAM-SHA-256", "PLAIN"):
        token = login(tc, "broker-1", "dave", "dave-pw", mechanism).access_token
        codes = []
        for broker in ("broker-1", "broker-2"):  # one token, every broker
            with token_channel(tc, broker) as channel:
                answer = _produce(channel, token, f"by {mechanism}".encode())
            codes.append(answer.responses[0].partitions[0].error_code)
        assert sorted(codes) == [0, 6]  # written by the leader; the other is NOT_LEADER
    assert "by SCRAM-SHA-512" in consume_all(tc).stdout  # the admin reads it
    refused = consume_all(tc, dave)
    assert refused.returncode == 1 and "TOPIC_AUTHORIZATION_FAILED" in refused.stderr
    tc.cli("acls", "add", "--allow-principal", "User:dave", "--operation", "Read",
           "--topic", "tokens")  # fmt: skip

    def reads() -> bool:
        got = consume_all(tc, dave)
        return got.returncode == 0 and "by SCRAM-SHA-512" in got.stdout

    wait_until(reads, timeout_s=DEADLINE_S, what="dave reading with his token after the Read ACL")
    answer = login(tc, "broker-2", "dave", "dave-pw", "SCRAM-SHA-256")
    assert answer.principal == "User:dave" and answer.access_token.startswith("mbt1.")


def test_bad_logins_are_refused_with_their_reason(tc: Cluster) -> None:
    from minibroker.runtime.grpc_token_login import LoginFailed

    tc.cli("users", "add", "erin", "--password", "erin-pw")
    with pytest.raises(LoginFailed, match="SASL_AUTHENTICATION_FAILED"):
        login(tc, "broker-1", "erin", "not-erins", "SCRAM-SHA-512")
    with pytest.raises(LoginFailed, match="SASL_AUTHENTICATION_FAILED"):
        login(tc, "broker-1", "nobody", "x", "PLAIN")
    with pytest.raises(LoginFailed, match="GSSAPI"):  # the client knows it has no GSSAPI
        login(tc, "broker-1", "erin", "erin-pw", "GSSAPI")
    from minibroker.rpc import broker_pb2, broker_pb2_grpc

    with token_channel(tc, "broker-1") as channel:  # and the broker, asked anyway
        ask = broker_pb2.AuthenticateRequest(mechanism="GSSAPI", sasl_token=b"x")
        (answer,) = broker_pb2_grpc.BrokerStub(channel).Authenticate(iter([ask]), timeout=10)
    assert answer.error_code == 33 and not answer.access_token  # UNSUPPORTED_SASL_MECHANISM
    before = sorted(consume_all(tc).stdout.splitlines())
    wrong = client_properties(tc, "erin", "wrong", "SCRAM-SHA-512")
    refused = tool(tc, wrong, "produce", "tokens", stdin="never\n")
    assert refused.returncode == 1
    assert "SASL_AUTHENTICATION_FAILED" in refused.stderr and "Traceback" not in refused.stderr
    assert sorted(consume_all(tc).stdout.splitlines()) == before  # two partitions: any order


def _produce(channel: Any, token: str, value: bytes) -> Any:
    from minibroker.rpc import broker_pb2, broker_pb2_grpc
    from tests.integration.rpc import batch

    request = broker_pb2.ProduceRequest(acks=-1, timeout_ms=5000)
    t = request.topics.add(name="tokens")
    t.partitions.add(partition_index=0, records=batch(value))
    stub = broker_pb2_grpc.BrokerStub(channel)
    return stub.Produce(request, metadata=(("authorization", f"Bearer {token}"),), timeout=10)


def test_forged_and_revoked_tokens_are_unauthenticated(tc: Cluster) -> None:
    """A token with its signature altered, or signed with another key, is refused before any
    handler (UNAUTHENTICATED); deleting a user revokes the tokens it holds on every broker
    within the bound; nothing they sent is written."""
    import grpc

    from minibroker.core.security.tokens import mint

    tc.cli("users", "add", "frank", "--password", "frank-pw")
    tc.cli("acls", "add", "--allow-principal", "User:frank", "--operation", "Write",
           "--topic", "tokens")  # fmt: skip
    token = login(tc, "broker-1", "frank", "frank-pw", "SCRAM-SHA-512").access_token
    before = consume_all(tc).stdout
    forged = [
        token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB"),
        mint(b"not the cluster's key", "admin", 0, 1 << 50, "n")[0],
        "garbage",
    ]
    codes = []
    for broker in ("broker-1", "broker-2"):
        with token_channel(tc, broker) as channel:
            for bad in forged:
                with pytest.raises(grpc.RpcError) as refused:
                    _produce(channel, bad, b"forged")
                assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
            ok = _produce(channel, token, b"by frank")  # the genuine token: any broker
            codes.append(ok.responses[0].partitions[0].error_code)
    assert sorted(codes) == [0, 6]  # written by the leader; the other NOT_LEADER_OR_FOLLOWER
    deleted = tc.cli("users", "delete", "frank")
    assert "removed" in deleted.stdout, (deleted.stdout, deleted.stderr)

    seen: dict[str, str] = {}

    def revoked_everywhere() -> bool:
        for broker in ("broker-1", "broker-2"):
            with token_channel(tc, broker) as channel:
                try:
                    answer = _produce(channel, token, b"probe")  # may land until revoked
                    seen[broker] = f"answered {answer}"
                except grpc.RpcError as exc:
                    seen[broker] = f"{exc.code()}: {exc.details()}"
        return all(s.startswith(str(grpc.StatusCode.UNAUTHENTICATED)) for s in seen.values())

    try:
        wait_until(revoked_everywhere, timeout_s=REVOCATION_BOUND_S, what="revocation")
    except WaitTimeout:
        pytest.fail(f"frank's token not refused on every broker after delete: {seen}")
    for broker in ("broker-1", "broker-2"):
        with token_channel(tc, broker) as channel, pytest.raises(grpc.RpcError) as refused:
            _produce(channel, token, b"after revocation")
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED
    after = consume_all(tc).stdout
    assert "forged" not in after and "after revocation" not in after
    assert after.count("by frank") == 1 + before.count("by frank")


def test_a_token_never_makes_its_holder_a_node(tc: Cluster) -> None:
    """Even the super user's token is not a controller's certificate: LeaderAndIsr on the
    TOKEN listener is CLUSTER_AUTHORIZATION_FAILED; and the master key is never shown."""
    from minibroker.rpc import broker_pb2, broker_pb2_grpc, control_pb2, control_pb2_grpc

    admin = json.loads(tc.cli("cluster", "status", "--json").stdout)["admin_client_config"]
    password = next(
        line.split("=", 1)[1]
        for line in Path(admin).read_text().splitlines()
        if line.startswith("sasl.password=")
    )
    token = login(tc, "broker-1", "admin", password, "SCRAM-SHA-512").access_token
    metadata = (("authorization", f"Bearer {token}"),)
    with token_channel(tc, "broker-1") as channel:
        lai = control_pb2.LeaderAndIsrRequest(controller_id=101, controller_epoch=99)
        refused = control_pb2_grpc.ControlStub(channel).LeaderAndIsr(
            lai, metadata=metadata, timeout=DEADLINE_S
        )
        assert refused.error_code == 31  # CLUSTER_AUTHORIZATION_FAILED
        described = broker_pb2_grpc.BrokerStub(channel).DescribeBroker(
            broker_pb2.DescribeBrokerRequest(), metadata=metadata, timeout=DEADLINE_S
        )
    assert described.error_code == 0  # the super user may describe the cluster
    assert described.config["delegation.token.master.key"] == "[hidden]"
    secret = (tc.dir / "security" / "broker-secrets.properties").read_text().split("=", 1)[1]
    log = Path(tc.state.process("broker-1").log_file).read_text()
    assert secret.strip() not in log
