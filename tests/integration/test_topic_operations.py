"""Operating a running cluster as Kafka 2.6's admin tools do (issue 26), with unmodified Kafka
admin clients, ZooKeeper writes in Kafka's format and the `minibroker` CLI, on one cluster of
real processes shared by the module: live configs (PlaintextAdminIntegrationTest's
testIncrementalAlterConfigsForTopic / checkInvalidAlterConfigs / testDescribeConfigsForTopic,
DynamicConfigChangeTest), more partitions (AddPartitionsTest, testCreatePartitions), topic
deletion (DeleteTopicTest: testDeleteTopicWithAllAliveReplicas,
testResumeDeleteTopicWithRecoveredFollower, testRecreateTopicAfterDeletion), topics created on
first use (testAutoCreateTopic), and the group tools (testConsumerGroups)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ConfigEntityZNode, TopicZNode
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import create_topic, kafka_bootstrap

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def oc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("operations") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1", "--set", "zookeeper.session.timeout.ms=3000"
    ) as c:
        yield c


def admin_client(c: Cluster) -> Any:
    from kafka.admin import KafkaAdminClient

    return KafkaAdminClient(bootstrap_servers=kafka_bootstrap(c).split(","))


def config_node(c: Cluster, kind: str, name: str) -> dict[str, str] | None:
    got = c.zk.get_or_none(ConfigEntityZNode.path(kind, name))
    return None if got is None else ConfigEntityZNode.decode(got[0])


def describe_broker_config(c: Cluster, broker: int) -> dict[str, str]:
    from minibroker.client.admin import describe_broker

    return describe_broker(c.reload().process(f"broker-{broker}").address).config


# ---- configs that change while the cluster runs -------------------------------------------------


def test_incremental_alter_configs_reach_zookeeper_and_every_broker(oc: Cluster) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    create_topic(oc, "conf")
    with closing(admin_client(oc)) as admin:
        admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "conf", {"retention.ms": "1000",
                                                               "min.insync.replicas": "3"})]
        )  # fmt: skip
        assert config_node(oc, "topics", "conf") == {
            "min.insync.replicas": "3",
            "retention.ms": "1000",
        }  # AlterConfigs replaces the topic's overrides (min.insync.replicas=2 from create)
        described = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, "conf")], include_synonyms=True,
            config_filter="all",
        )  # fmt: skip
        entries = described["topic"]["conf"]
        assert entries["retention.ms"]["value"] == "1000"
        assert entries["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert entries["compression.type"]["value"] == "producer"  # every LogConfig key
        assert entries["compression.type"]["config_source"] == "DEFAULT_CONFIG"
    changes = sorted(oc.zk.children("/config/changes"))
    last, _ = oc.zk.get(f"/config/changes/{changes[-1]}")
    assert json.loads(last or b"{}") == {"version": 2, "entity_path": "topics/conf"}
    wait_until(  # each broker reads the change notification in its own time (asynchronous,
        # as Kafka's ZkConfigManager's watch on /config/changes)
        lambda: any(
            e["event"] == "config_changed" and e.get("entity_name") == "conf"
            for e in oc.log_events("broker-1")
        ),
        timeout_s=20,
        what="broker-1's config_changed event for topic conf",
    )


def test_raising_min_insync_replicas_judges_the_next_acks_all_produce(oc: Cluster) -> None:
    from confluent_kafka.admin import AdminClient
    from confluent_kafka.admin._config import AlterConfigOpType, ConfigEntry, ConfigResource

    from minibroker.client import Producer

    create_topic(oc, "minisr", partitions=1)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(oc)})
    change = ConfigEntry("min.insync.replicas", "4", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource("topic", "minisr", incremental_configs=[change])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)
    assert config_node(oc, "topics", "minisr") == {"min.insync.replicas": "4"}
    # RF 3 < 4: the ISR can never be large enough, so acks=all is refused at once.
    import asyncio

    from minibroker.client.errors import ProduceError

    async def produce() -> None:
        bootstrap = [p.address for p in oc.reload().by_role("broker")]
        async with Producer(
            bootstrap, acks=-1, retries=0, request_timeout_ms=5000, delivery_timeout_ms=10_000
        ) as p:
            await p.send_and_wait("minisr", b"x", partition=0)

    def refused() -> bool:
        try:
            asyncio.run(produce())
        except ProduceError as exc:
            return "NOT_ENOUGH_REPLICAS" in str(exc)
        return False

    wait_until(refused, timeout_s=20, what="acks=all refused under min.insync.replicas=4")


def test_invalid_configs_are_refused_and_nothing_is_written(oc: Cluster) -> None:
    from kafka.admin import ConfigResource, ConfigResourceType

    create_topic(oc, "strict")
    before = config_node(oc, "topics", "strict")
    topic, broker = ConfigResourceType.TOPIC, ConfigResourceType.BROKER
    cases = [
        (ConfigResource(topic, "strict", {"min.insync.replicas": "0"}),
         "InvalidRequestError", "Value must be at least 1"),
        (ConfigResource(topic, "strict", {"no.such": "1"}),
         "InvalidConfigurationError", "Unknown topic config name: no.such"),
        (ConfigResource(broker, "1", {"broker.id": "7"}),
         "InvalidRequestError", "Cannot update these configs dynamically"),
    ]  # fmt: skip
    with closing(admin_client(oc)) as admin:
        for incremental in (True, False):  # IncrementalAlterConfigs, then AlterConfigs
            for resource, error, text in cases:
                got = admin.alter_configs(
                    [resource], raise_on_unknown=False, incremental=incremental
                )
                (result,) = [r for kind in got.values() for r in kind.values()]
                assert error in result and text in result, (incremental, result)
    assert config_node(oc, "topics", "strict") == before
    assert config_node(oc, "brokers", "1") is None


def test_broker_configs_change_without_a_restart(oc: Cluster) -> None:
    oc.cli("configs", "--entity-type", "brokers", "--entity-default", "--alter",
           "--add-config", "leader.replication.throttled.rate=12345")  # fmt: skip
    wait_until(
        lambda: all(
            describe_broker_config(oc, b)["leader.replication.throttled.rate"] == "12345"
            for b in (1, 2, 3)
        ),
        timeout_s=20,
        what="every broker to apply the cluster-wide default",
    )
    oc.cli("configs", "--entity-type", "brokers", "--entity-name", "2", "--alter",
           "--add-config", "leader.replication.throttled.rate=99")  # fmt: skip
    wait_until(
        lambda: describe_broker_config(oc, 2)["leader.replication.throttled.rate"] == "99",
        timeout_s=20,
        what="broker 2's own value to win over the default",
    )
    assert describe_broker_config(oc, 1)["leader.replication.throttled.rate"] == "12345"
    out = oc.cli("configs", "--entity-type", "brokers", "--entity-name", "2", "--describe",
                 "--all", "--json").stdout  # fmt: skip
    rows = {r["name"]: r for r in json.loads(out)}
    assert rows["leader.replication.throttled.rate"]["source"] == "DYNAMIC_BROKER_CONFIG"
    assert rows["replica.lag.time.max.ms"]["source"] in ("DEFAULT_CONFIG", "STATIC_BROKER_CONFIG")
    for name in ("--entity-default", "--entity-name=2"):
        oc.cli("configs", "--entity-type", "brokers", *name.split("="), "--alter",
               "--delete-config", "leader.replication.throttled.rate")  # fmt: skip
    wait_until(
        lambda: (
            describe_broker_config(oc, 2)["leader.replication.throttled.rate"] == str(2**63 - 1)
        ),
        timeout_s=20,
        what="the throttle rate back to Kafka's default",
    )


# ---- more partitions (KIP-195) ----------------------------------------------------------------


def test_create_partitions_grows_a_topic_with_leaders_on_their_own(oc: Cluster) -> None:
    from kafka.errors import InvalidPartitionsError

    create_topic(oc, "grow", partitions=2)
    with closing(admin_client(oc)) as admin:
        admin.create_partitions({"grow": 5}, timeout_ms=30_000)
        with pytest.raises(InvalidPartitionsError):
            admin.create_partitions({"grow": 4})
        (described,) = admin.describe_topics(["grow"])
    assert len(described["partitions"]) == 5
    assert all(p["leader_id"] >= 0 for p in described["partitions"])
    data, _ = oc.zk.get(TopicZNode.path("grow"))
    assert json.loads(data or b"{}")["version"] == 2
    oc.cli("topics", "alter", "grow", "--partitions", "6", "--wait")
    assert len(TopicZNode.decode("grow", oc.zk.get(TopicZNode.path("grow"))[0]).partitions) == 6
    events = [e for e in oc.log_events("controller-1") if e["event"] == "partitions_added"]
    assert [e["total"] for e in events if e["topic"] == "grow"] == [5, 6]


# ---- topics created on first use ----------------------------------------------------------------


def test_a_producer_creates_an_unknown_topic_as_kafka_does_by_default(oc: Cluster) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap(oc).split(","), acks="all")
    with closing(producer):
        sent = producer.send("born-on-first-use", b"x").get(timeout=30)
    assert sent.offset == 0
    assignment = TopicZNode.decode(
        "born-on-first-use", oc.zk.get(TopicZNode.path("born-on-first-use"))[0]
    )
    assert len(assignment.partitions) == 1 and len(assignment.partitions[0]) == 1  # 1 and 1


# ---- group tools ------------------------------------------------------------------------------


def test_list_describe_and_delete_groups_as_lag_tools_and_teardowns_do(oc: Cluster) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTP

    create_topic(oc, "grouped", partitions=1)
    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(oc).split(","), group_id="lagging",
        enable_auto_commit=False,
    )  # fmt: skip
    with closing(consumer):
        consumer.assign([KafkaTP("grouped", 0)])
        from kafka.structs import OffsetAndMetadata

        consumer.commit({KafkaTP("grouped", 0): OffsetAndMetadata(0, "kept metadata", -1)})
        committed = consumer.committed(KafkaTP("grouped", 0), metadata=True)
        assert committed is not None and committed.metadata == "kept metadata"
    with closing(admin_client(oc)) as admin:
        # Offsets committed without a subscription: Kafka's protocol-less group, type "".
        assert {"group_id": "lagging", "protocol_type": ""} in admin.list_groups()
        described = admin.describe_groups(["lagging"])["lagging"]
        assert (described["group_state"], described["error"]) == ("Empty", None)
        assert admin.delete_groups(["lagging"]) == {"lagging": "OK"}
        assert "lagging" not in {g["group_id"] for g in admin.list_groups()}
        assert admin.delete_groups(["lagging"]) == {"lagging": "GroupIdNotFoundError"}


# ---- elections and log dirs ------------------------------------------------------------------


def test_elect_leaders_moves_leadership_back_to_the_preferred_replica(oc: Cluster) -> None:
    from kafka.errors import ElectionNotNeededError

    from tests.integration.kafka_wire import leader_of

    oc.cli("topics", "create", "elected", "--replica-assignment", "1:2:3", "--wait")
    oc.cli("cluster", "stop", "broker-1")  # controlled shutdown: broker 2 leads
    oc.cli("cluster", "start", "broker-1")
    wait_until(lambda: leader_of(oc, "elected", 0) == 2, timeout_s=30, what="broker 2 leading")
    wait_until(
        lambda: 1 in json.loads(oc.cli("topics", "describe", "elected", "--json").stdout)[0]["isr"],
        timeout_s=30,
        what="broker 1 back in the ISR",
    )
    with closing(admin_client(oc)) as admin:
        admin.elect_leaders(0, {"elected": [0]}, timeout_ms=30_000)  # PREFERRED
        assert leader_of(oc, "elected", 0) == 1
        # Again: ELECTION_NOT_NEEDED, which the client does not raise.
        response = admin.elect_leaders(0, {"elected": [0]}, raise_errors=False)
    (result,) = response.replica_election_results
    assert result.partition_result[0].error_code == ElectionNotNeededError.errno
    events = [e for e in oc.log_events("controller-1") if e["event"] == "leader_elected"]
    assert any(e.get("cause") == "admin_client" for e in events)


def test_describe_log_dirs_gives_each_replicas_size(oc: Cluster) -> None:
    from kafka import KafkaProducer

    create_topic(oc, "sized", partitions=1)
    with closing(KafkaProducer(bootstrap_servers=kafka_bootstrap(oc).split(","), acks="all")) as p:
        for _ in range(50):
            p.send("sized", b"x" * 1000, partition=0)
        p.flush(30)
    with closing(admin_client(oc)) as admin:
        dirs = admin.describe_log_dirs({"sized": [0]})
    # kafka-python: one entry per broker, its DescribeLogDirs results as dicts.
    sizes = {
        broker["broker"]: part["partition_size"]
        for broker in dirs
        for result in broker["log_dirs"]
        if result["error_code"] == 0
        for topic in result["topics"]
        if topic["name"] == "sized"
        for part in topic["partitions"]
    }
    assert sorted(sizes) == [1, 2, 3], dirs
    assert all(size > 50_000 for size in sizes.values()), dirs


def test_confluent_kafkas_admin_client_creates_grows_lists_elects_and_deletes(
    oc: Cluster,
) -> None:
    """The same operations through librdkafka's admin client, as a confluent-kafka
    application's test suite makes them: create, more partitions, the group tools, a
    preferred election that is not needed, delete (PlaintextAdminIntegrationTest's
    testCreatePartitions, testConsumerGroups, testElectPreferredLeaders, testDeleteTopics)."""
    from confluent_kafka import Consumer, ElectionType, KafkaError
    from confluent_kafka import TopicPartition as ConfluentTP
    from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(oc)})

    def done(futures: dict[Any, Any]) -> dict[Any, Any]:
        return {key: future.result(timeout=30) for key, future in futures.items()}

    done(admin.create_topics([NewTopic("confluent-ops", 1, 3)], operation_timeout=30))
    done(admin.create_partitions([NewPartitions("confluent-ops", 3)], operation_timeout=30))
    wait_until(
        lambda: len(admin.list_topics("confluent-ops", timeout=10).topics["confluent-ops"]
                    .partitions) == 3,
        timeout_s=30, what="confluent-ops with 3 partitions in the metadata",
    )  # fmt: skip
    znode = TopicZNode.decode("confluent-ops", oc.zk.get(TopicZNode.path("confluent-ops"))[0])
    assert sorted(znode.partitions) == [0, 1, 2]

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(oc), "group.id": "confluent-lag",
                         "enable.auto.commit": False})  # fmt: skip
    try:
        consumer.commit(offsets=[ConfluentTP("confluent-ops", 0, 0)], asynchronous=False)
    finally:
        consumer.close()
    listed = admin.list_consumer_groups().result(timeout=30)
    assert "confluent-lag" in {g.group_id for g in listed.valid}, listed
    (described,) = done(admin.describe_consumer_groups(["confluent-lag"])).values()
    assert (described.group_id, described.state.name, described.members) == (
        "confluent-lag", "EMPTY", []
    )  # fmt: skip
    done(admin.delete_consumer_groups(["confluent-lag"]))

    # Every partition is led by its first replica: a preferred election is not needed.
    elected = admin.elect_leaders(ElectionType.PREFERRED, [ConfluentTP("confluent-ops", 0)]).result(
        timeout=30
    )
    (error,) = elected.values()
    assert error is not None and error.code() == KafkaError.ELECTION_NOT_NEEDED, elected

    done(admin.delete_topics(["confluent-ops"], operation_timeout=30))
    wait_until(
        lambda: (
            oc.zk.exists(TopicZNode.path("confluent-ops")) is None
            and oc.zk.exists("/admin/delete_topics/confluent-ops") is None
        ),
        timeout_s=30,
        what="the controller to finish deleting confluent-ops",
    )


# ---- topic deletion (last: it stops and starts a broker) ----------------------------------


def test_delete_topics_removes_every_trace_and_the_name_can_be_used_again(oc: Cluster) -> None:
    from kafka import KafkaProducer

    create_topic(oc, "doomed")
    with closing(KafkaProducer(bootstrap_servers=kafka_bootstrap(oc).split(","), acks="all")) as p:
        for i in range(20):
            p.send("doomed", b"old-%d" % i, partition=i % 3)
        p.flush(30)
    with closing(admin_client(oc)) as admin:
        admin.delete_topics(["doomed"], timeout_ms=30_000)
    # The topic's znode goes first, then its config and the request (completeDeleteTopic).
    wait_until(
        lambda: all(
            oc.zk.exists(path) is None
            for path in (
                TopicZNode.path("doomed"),
                ConfigEntityZNode.path("topics", "doomed"),
                "/admin/delete_topics/doomed",
            )
        ),
        timeout_s=30,
        what="the controller to finish deleting doomed",
    )
    for proc in oc.reload().by_role("broker"):
        dirs = list((Path(proc.data_dir) / "data").glob("doomed-*"))
        assert dirs == [], f"{proc.name} kept {dirs}"
    events = [e for e in oc.log_events("controller-1") if e["event"] == "topic_deleted"]
    assert [e["partitions"] for e in events if e["topic"] == "doomed"] == [3]
    create_topic(oc, "doomed")
    import asyncio

    from minibroker.client.read_back import read_partition

    bootstrap = [p.address for p in oc.reload().by_role("broker")]
    assert asyncio.run(read_partition(bootstrap, TopicPartition("doomed", 0))) == {}


def test_deletion_waits_for_an_offline_replica_and_resumes_when_it_returns(oc: Cluster) -> None:
    create_topic(oc, "patient")
    oc.cli("cluster", "stop", "broker-3")
    try:
        oc.cli("topics", "delete", "patient")
        wait_until(
            lambda: any(
                e["event"] == "topic_deletion_halted" and "patient" in e.get("topics", [])
                for e in oc.log_events("controller-1")
            ),
            timeout_s=30,
            what="the deletion to halt for broker 3",
        )
        assert oc.zk.exists(TopicZNode.path("patient")) is not None  # waits for broker 3
    finally:
        oc.cli("cluster", "start", "broker-3")
    wait_until(lambda: oc.zk.exists(TopicZNode.path("patient")) is None, timeout_s=60,
               what="the deletion to finish once broker 3 is back")  # fmt: skip
    broker3 = oc.reload().process("broker-3")
    assert list((Path(broker3.data_dir) / "data").glob("patient-*")) == []


def test_kcat_lists_brokers_topics_leaders_replicas_and_isrs(oc: Cluster) -> None:
    """`kcat -L` (Debian's kcat, librdkafka's metadata) agrees with `topics describe`."""
    import shutil
    import subprocess

    kcat = shutil.which("kcat")
    if kcat is None:
        reason = "kcat is not installed (apt-get install kcat; the test command installs it)"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"CI=true and {reason}")
        pytest.skip(reason)
    create_topic(oc, "listed")
    out = subprocess.run(
        [kcat, "-b", kafka_bootstrap(oc), "-L", "-J", "-t", "listed"],
        capture_output=True, text=True, timeout=30, check=True, stdin=subprocess.DEVNULL,
    ).stdout  # fmt: skip
    got = json.loads(out)
    assert sorted(b["id"] for b in got["brokers"]) == [1, 2, 3]
    (topic,) = got["topics"]
    described = {
        p["partition"]: p
        for p in json.loads(oc.cli("topics", "describe", "listed", "--json").stdout)
    }
    for p in topic["partitions"]:
        want = described[p["partition"]]
        assert p["leader"] == want["leader"]
        assert [r["id"] for r in p["replicas"]] == want["replicas"]
        assert sorted(r["id"] for r in p["isrs"]) == sorted(want["isr"])
