"""Golden bytes from shared/kafka-reference.md §1, and order-agnostic decoding."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import (
    PERSISTENT_PATHS,
    BrokerIdZNode,
    BrokerRegistration,
    ClusterIdZNode,
    ConfigEntityChangeNotificationSequenceZNode,
    ConfigEntityZNode,
    ControllerEpochZNode,
    ControllerZNode,
    DeleteTopicsTopicZNode,
    IsrChangeNotificationSequenceZNode,
    LogDirEventNotificationSequenceZNode,
    PreferredReplicaElectionZNode,
    ReassignPartitionsZNode,
    TopicAssignment,
    TopicPartitionStateZNode,
    TopicZNode,
    ZNodeFormatError,
)

T0 = TopicPartition("t", 0)


# ---- /brokers/ids/<id> (§1.3) ------------------------------------------------------------------

BROKER_213 = (
    b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://host1:9092"],"jmx_port":-1,"port":9092,"host":"host1",'
    b'"version":4,"timestamp":"1600000000000"}'
)
BROKER_212 = (
    b'{"listener_security_protocol_map":{"PLAINTEXT":"PLAINTEXT"},'
    b'"endpoints":["PLAINTEXT://localhost:9092"],"jmx_port":-1,"host":"localhost",'
    b'"timestamp":"1535447121995","port":9092,"version":4}'
)


def test_broker_registration_encodes_kafka_213_bytes() -> None:
    reg = BrokerRegistration(1, ("PLAINTEXT://host1:9092",), timestamp_ms=1600000000000)
    assert BrokerIdZNode.encode(reg) == BROKER_213


def test_broker_registration_with_rack_puts_rack_after_endpoints() -> None:
    reg = BrokerRegistration(1, ("PLAINTEXT://host1:9092",), timestamp_ms=1, rack="r1")
    assert b'"endpoints":["PLAINTEXT://host1:9092"],"rack":"r1","jmx_port":-1,' in (
        BrokerIdZNode.encode(reg)
    )


@pytest.mark.parametrize("data", [BROKER_213, BROKER_212])
def test_broker_registration_decodes_either_scala_order(data: bytes) -> None:
    reg = BrokerIdZNode.decode(1, data)
    assert reg.version == 4
    assert reg.jmx_port == -1
    assert reg.endpoint("PLAINTEXT") is not None
    assert reg.endpoint("PLAINTEXT")[1] == 9092  # type: ignore[index]


def test_broker_registration_without_plaintext_listener_has_null_host() -> None:
    reg = BrokerRegistration(
        2, ("SSL://h:9093",), listener_security_protocol_map={"SSL": "SSL"}, timestamp_ms=5
    )
    obj = json.loads(BrokerIdZNode.encode(reg))
    assert obj["host"] is None and obj["port"] == -1


def test_broker_registration_round_trips() -> None:
    reg = BrokerRegistration(3, ("PLAINTEXT://127.0.0.1:1234",), timestamp_ms=42, rack="a")
    assert BrokerIdZNode.decode(3, BrokerIdZNode.encode(reg)) == reg


def test_broker_registration_version_1_uses_host_and_port() -> None:
    reg = BrokerIdZNode.decode(1, b'{"version":1,"host":"h","port":9092}')
    assert reg.endpoint() == ("h", 9092)


# ---- /brokers/topics/<t> (§1.4) ----------------------------------------------------------------

TOPIC = (
    b'{"version":2,"partitions":{"0":[1,2,3],"1":[2,3,1],"2":[3,1,2]},'
    b'"adding_replicas":{},"removing_replicas":{}}'
)


def test_topic_assignment_golden() -> None:
    a = TopicAssignment({0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)})
    assert TopicZNode.encode(a) == TOPIC
    assert TopicZNode.decode("t", TOPIC) == a


def test_topic_assignment_version_1_and_hash_order_decode() -> None:
    v1 = b'{"partitions":{"11":[1],"0":[2,1],"10":[3]},"version":1}'
    a = TopicZNode.decode("t", v1)
    assert a.partitions == {11: (1,), 0: (2, 1), 10: (3,)}
    assert a.adding_replicas == {} and a.removing_replicas == {}


def test_topic_assignment_keeps_replica_order() -> None:
    assert TopicZNode.decode("t", TOPIC).partitions[1] == (2, 3, 1)


# ---- partition state (§1.5) --------------------------------------------------------------------

STATE = b'{"controller_epoch":1,"leader":1,"version":1,"leader_epoch":0,"isr":[1,2,3]}'


def test_partition_state_golden() -> None:
    s = LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1, zk_version=7)
    assert TopicPartitionStateZNode.encode(s) == STATE
    assert TopicPartitionStateZNode.decode(STATE, zk_version=7) == s
    assert TopicPartitionStateZNode.path(T0) == "/brokers/topics/t/partitions/0/state"


def test_partition_state_decodes_any_key_order() -> None:
    shuffled = b'{"isr":[2],"version":1,"leader_epoch":4,"leader":-1,"controller_epoch":3}'
    s = TopicPartitionStateZNode.decode(shuffled, zk_version=0)
    assert (s.leader, s.leader_epoch, s.isr, s.controller_epoch) == (-1, 4, (2,), 3)


@given(
    leader=st.integers(-1, 1000),
    epoch=st.integers(0, 2**31 - 1),
    isr=st.lists(st.integers(0, 1000), max_size=5),
    ctrl=st.integers(0, 2**31 - 1),
    version=st.integers(0, 2**31 - 1),
)
def test_partition_state_round_trips(
    leader: int, epoch: int, isr: list[int], ctrl: int, version: int
) -> None:
    s = LeaderAndIsr(leader, epoch, tuple(isr), ctrl, version)
    assert TopicPartitionStateZNode.decode(TopicPartitionStateZNode.encode(s), version) == s


@pytest.mark.parametrize(
    "bad",
    [
        b"",
        b"not json",
        b"[1,2]",
        b'{"leader":"1","leader_epoch":0,"isr":[],"controller_epoch":1}',
        b'{"leader":1,"leader_epoch":0,"isr":"1,2","controller_epoch":1}',
    ],
)
def test_partition_state_rejects_garbage_with_a_clear_error(bad: bytes) -> None:
    with pytest.raises(ZNodeFormatError):
        TopicPartitionStateZNode.decode(bad, 0)


# ---- /controller, /controller_epoch (§1.6, §1.7) -----------------------------------------------


def test_controller_golden() -> None:
    data = ControllerZNode.encode(1, 1600000000000)
    assert data == b'{"version":1,"brokerid":1,"timestamp":"1600000000000"}'
    assert ControllerZNode.decode(data) == 1
    assert ControllerZNode.decode(b'{"timestamp":"1","brokerid":102,"version":1}') == 102


def test_controller_epoch_is_a_bare_integer() -> None:
    assert ControllerEpochZNode.encode(7) == b"7"
    assert ControllerEpochZNode.decode(b"7") == 7
    for bad in (b"", b"7\n", b'{"epoch":7}', None):
        with pytest.raises(ZNodeFormatError):
            ControllerEpochZNode.decode(bad)


# ---- notifications (§1.8, §1.9, §1.11) --------------------------------------------------------


def test_isr_change_notification_golden() -> None:
    parts = [TopicPartition("t", 0), TopicPartition("t", 2)]
    data = IsrChangeNotificationSequenceZNode.encode(parts)
    assert (
        data
        == b'{"version":1,"partitions":[{"topic":"t","partition":0},{"topic":"t","partition":2}]}'
    )
    assert IsrChangeNotificationSequenceZNode.decode(data) == tuple(parts)
    assert IsrChangeNotificationSequenceZNode.path_prefix == "/isr_change_notification/isr_change_"
    assert IsrChangeNotificationSequenceZNode.sequence("isr_change_0000000017") == 17
    with pytest.raises(ZNodeFormatError):
        IsrChangeNotificationSequenceZNode.sequence("log_dir_event_0000000001")


def test_log_dir_event_golden() -> None:
    data = LogDirEventNotificationSequenceZNode.encode(1)
    assert data == b'{"version":1,"broker":1,"event":1}'
    assert LogDirEventNotificationSequenceZNode.decode(data) == (1, 1)


def test_config_golden() -> None:
    cfg = {"min.insync.replicas": "2", "unclean.leader.election.enable": "true"}
    data = ConfigEntityZNode.encode(cfg)
    assert data == (
        b'{"version":1,"config":{"min.insync.replicas":"2",'
        b'"unclean.leader.election.enable":"true"}}'
    )
    assert ConfigEntityZNode.decode(data) == cfg
    assert ConfigEntityZNode.path("topics", "t") == "/config/topics/t"
    change = ConfigEntityChangeNotificationSequenceZNode.encode("topics/t")
    assert change == b'{"version":2,"entity_path":"topics/t"}'
    assert ConfigEntityChangeNotificationSequenceZNode.decode(change) == "topics/t"


def test_cluster_id_version_is_a_string() -> None:
    data = ClusterIdZNode.encode("abc")
    assert data == b'{"version":"1","id":"abc"}'
    assert ClusterIdZNode.decode(data) == "abc"


def test_admin_znodes_golden() -> None:
    assert DeleteTopicsTopicZNode.path("t") == "/admin/delete_topics/t"
    r = ReassignPartitionsZNode.encode({T0: [1, 2, 3]})
    assert r == b'{"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2,3]}]}'
    assert ReassignPartitionsZNode.decode(r) == {T0: (1, 2, 3)}
    p = PreferredReplicaElectionZNode.encode([T0])
    assert p == b'{"version":1,"partitions":[{"topic":"t","partition":0}]}'
    assert PreferredReplicaElectionZNode.decode(p) == (T0,)


def test_persistent_paths_are_kafkas() -> None:
    assert "/isr_change_notification" in PERSISTENT_PATHS
    assert "/brokers/ids" in PERSISTENT_PATHS
    assert "/config/topics" in PERSISTENT_PATHS
    assert len(set(PERSISTENT_PATHS)) == len(PERSISTENT_PATHS) == 13
