"""`__consumer_offsets` (issue 29, section 1): committed offsets and group metadata on the
replicated log in Kafka 2.6's formats, created on first use, internal (a client cannot append
to it); the coordinator of a group is the leader of its partition, so killing that broker moves
the coordinator with the leadership and nothing committed is lost; and offsets an earlier
minibroker kept in ZooKeeper are moved into the topic once and removed from ZooKeeper.
Kafka's own tests: GroupCoordinatorIntegrationTest, ConsumerBounceTest
(testConsumptionWithBrokerFailures), OffsetsTopicIntegration tests in PlaintextConsumerTest."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from contextlib import closing
from typing import Any

import pytest

from minibroker import localcluster
from minibroker.core.coordinator_log.group_records import (
    GroupKey,
    OffsetKey,
    read_group_value,
    read_key,
    read_offset_value,
)
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.types import OFFSETS_TOPIC
from minibroker.core.types import TopicPartition as Tp
from minibroker.core.zk_layout import ConsumerOffsetZNode
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import create_topic, kafka_bootstrap, leader_of

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0
PARTITIONS = 5  # offsets.topic.num.partitions here (Kafka's test harness uses 5 too)


@pytest.fixture(scope="module")
def oc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("offsets") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1", "--set", "group.initial.rebalance.delay.ms=0",
        "--set", f"offsets.topic.num.partitions={PARTITIONS}",
    ) as c:  # fmt: skip
        create_topic(c, "orders", partitions=2)
        yield c


def bootstrap(c: Cluster) -> list[str]:
    return kafka_bootstrap(c).split(",")


def committed(c: Cluster, group: str, partitions: int = 2) -> dict[int, tuple[int, str]]:
    """What the group's coordinator answers OffsetFetch with (kafka-python); {} while there is
    no coordinator yet (the topic being created, a leader moving)."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    with closing(KafkaConsumer(bootstrap_servers=bootstrap(c), group_id=group)) as consumer:
        out = {}
        for p in range(partitions):
            try:
                found = consumer.committed(
                    TopicPartition("orders", p), metadata=True, timeout_ms=10_000
                )
            except KafkaError:
                return {}
            if found is not None and found.offset >= 0:
                out[p] = (found.offset, found.metadata)
        return out


def commit(c: Cluster, group: str, offsets: dict[int, tuple[int, str]]) -> None:
    from kafka import KafkaConsumer, OffsetAndMetadata, TopicPartition

    with closing(KafkaConsumer(bootstrap_servers=bootstrap(c), group_id=group)) as consumer:
        consumer.commit(
            {
                TopicPartition("orders", p): OffsetAndMetadata(o, meta)
                for p, (o, meta) in offsets.items()
            }
        )


def test_offsets_kept_in_zookeeper_move_into_the_topic_once(oc: Cluster) -> None:
    """An upgrade: offsets under /consumers (what earlier minibroker versions wrote) are
    committed to the group's partition by its coordinator when it loads it, then removed."""
    for p, offset in ((0, 5), (1, 9)):
        path = ConsumerOffsetZNode.path("legacy", Tp("orders", p))
        oc.zk.create(path, ConsumerOffsetZNode.encode(offset, "from zk"), makepath=True)
    want = {0: (5, "from zk"), 1: (9, "from zk")}
    # Each partition is its own OffsetFetch: poll until both answer (the move is one append).
    wait_until(lambda: committed(oc, "legacy") == want, timeout_s=DEADLINE_S, what=f"{want}")
    wait_until(
        lambda: oc.zk.exists(f"{ConsumerOffsetZNode.root}/legacy") is None,
        timeout_s=DEADLINE_S, what="the legacy offsets gone from ZooKeeper",
    )  # fmt: skip


def test_commits_are_records_of_the_internal_topic_in_kafkas_format(oc: Cluster) -> None:
    from kafka import KafkaConsumer, TopicPartition

    commit(oc, "audit", {0: (7, "seven"), 1: (3, "")})
    assert committed(oc, "audit") == {0: (7, "seven"), 1: (3, "")}
    rows = json.loads(oc.cli("topics", "describe", OFFSETS_TOPIC, "--json").stdout)
    assert len(rows) == PARTITIONS and all(len(r["replicas"]) == 3 for r in rows)
    p = partition_for("audit", PARTITIONS)
    tp = TopicPartition(OFFSETS_TOPIC, p)
    with closing(KafkaConsumer(bootstrap_servers=bootstrap(oc), enable_auto_commit=False)) as c:
        c.assign([tp])
        c.seek_to_beginning(tp)
        records = [r for batch in c.poll(5000, max_records=500).values() for r in batch]
    mine = {}
    for r in records:
        key = read_key(r.key)
        if isinstance(key, OffsetKey) and key.group == "audit":
            mine[key.partition] = read_offset_value(r.value)
    assert mine[0] is not None and (mine[0].offset, mine[0].metadata) == (7, "seven")
    from confluent_kafka import KafkaError, Producer

    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": kafka_bootstrap(oc), "retries": 0})
    producer.produce(
        OFFSETS_TOPIC, b"forged", partition=p, on_delivery=lambda e, _: errors.append(e)
    )
    producer.flush(30)
    assert [e.code() for e in errors] == [KafkaError.TOPIC_EXCEPTION]  # INVALID_TOPIC_EXCEPTION


def group_record(c: Cluster, group: str) -> Any:
    from kafka import KafkaConsumer, TopicPartition

    tp = TopicPartition(OFFSETS_TOPIC, partition_for(group, PARTITIONS))
    with closing(KafkaConsumer(bootstrap_servers=bootstrap(c), enable_auto_commit=False)) as cons:
        cons.assign([tp])
        cons.seek_to_beginning(tp)
        last = None
        for batch in cons.poll(5000, max_records=1000).values():
            for r in batch:
                if read_key(r.key) == GroupKey(group):
                    last = read_group_value(r.value)
        return last


def test_the_coordinator_moves_with_the_leader_and_nothing_committed_is_lost(
    oc: Cluster,
) -> None:
    """SIGKILL the leader of the group's partition: the next leader loads the partition and
    answers the same committed offsets; a group member's generation survives in the record."""
    from kafka import KafkaConsumer

    with closing(
        KafkaConsumer(
            "orders",
            bootstrap_servers=bootstrap(oc),
            group_id="mover",
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )  # fmt: skip
    ) as member:
        deadline = time.monotonic() + DEADLINE_S
        while not member.assignment():
            assert time.monotonic() < deadline, "the member never got its partitions"
            member.poll(200)
    value = wait_until(lambda: group_record(oc, "mover"), timeout_s=DEADLINE_S, what="record")
    assert value.protocol_type == "consumer" and value.generation >= 1
    commit(oc, "mover", {0: (11, "a"), 1: (12, "b")})
    victim = leader_of(oc, OFFSETS_TOPIC, partition_for("mover", PARTITIONS))
    localcluster.send(oc.reload(), f"broker-{victim}", "kill")
    try:
        want = {0: (11, "a"), 1: (12, "b")}
        wait_until(
            lambda: leader_of(oc, OFFSETS_TOPIC, partition_for("mover", PARTITIONS)) != victim
            and committed(oc, "mover") == want,
            timeout_s=DEADLINE_S,
            what=f"the offsets {want} from the new coordinator",
        )  # fmt: skip
    finally:
        oc.cli("cluster", "start", f"broker-{victim}")
