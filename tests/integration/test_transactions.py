"""Transactions (issue 29, sections 2-3) with confluent-kafka's transactional producer and
read_committed consumers against a real cluster: committed transactions appear once, aborted
ones never (to read_committed; read_uncommitted sees both), a zombie producer with the old epoch
is fenced, a transaction left open past its timeout is aborted by the coordinator, and offsets
sent to a transaction are committed with it. Kafka's own tests: TransactionsTest
(testBasicTransactions, testFencingOnCommit, testFencingOnSendOffsets,
testSendOffsetsWithGroupId, testAbortTransactionTimeout), the read_committed consumer tests
of PlaintextConsumerTest."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from minibroker.core.types import TRANSACTION_STATE_TOPIC
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import create_topic, kafka_bootstrap
from tests.kafka_clients.reading import READER, read_to_end

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0
PARTITIONS = 5  # __transaction_state and __consumer_offsets partitions here


@pytest.fixture(scope="module")
def tc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("txn") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1", "--set", "group.initial.rebalance.delay.ms=0",
        "--set", f"offsets.topic.num.partitions={PARTITIONS}",
        "--set", f"transaction.state.log.num.partitions={PARTITIONS}",
        "--set", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
    ) as c:  # fmt: skip
        create_topic(c, "in", partitions=2)
        create_topic(c, "out", partitions=2)
        yield c


def producer(c: Cluster, tid: str, **extra: Any) -> Any:
    from confluent_kafka import Producer

    p = Producer({"bootstrap.servers": kafka_bootstrap(c), "transactional.id": tid, **extra})
    p.init_transactions(DEADLINE_S)
    return p


def read_all(c: Cluster, topic: str, isolation: str) -> list[bytes]:
    """Every value of the topic a fresh consumer with `isolation` reads, to the topic's end
    (the LSO for read_committed)."""
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap(c), "group.id": f"reader-{uuid.uuid4().hex[:8]}",
         "isolation.level": isolation, **READER}
    )  # fmt: skip
    consumer.subscribe([topic])
    try:
        return [m.value() or b"" for m in read_to_end(consumer, DEADLINE_S)]
    finally:
        consumer.close()


def test_committed_transactions_appear_once_and_aborted_ones_never(tc: Cluster) -> None:
    p = producer(tc, "basic")
    p.begin_transaction()
    for i in range(5):
        p.produce("out", b"committed-%d" % i, partition=i % 2)
    p.commit_transaction(DEADLINE_S)
    p.begin_transaction()
    for i in range(4):
        p.produce("out", b"aborted-%d" % i, partition=i % 2)
    p.flush(DEADLINE_S)
    p.abort_transaction(DEADLINE_S)
    p.begin_transaction()
    p.produce("out", b"committed-late", partition=0)
    p.commit_transaction(DEADLINE_S)

    committed = read_all(tc, "out", "read_committed")
    assert sorted(v for v in committed if v.startswith(b"committed")) == sorted(
        [b"committed-%d" % i for i in range(5)] + [b"committed-late"]
    )
    assert not [v for v in committed if v.startswith(b"aborted")]
    uncommitted = read_all(tc, "out", "read_uncommitted")
    assert sorted(v for v in uncommitted if v.startswith(b"aborted")) == [
        b"aborted-%d" % i for i in range(4)
    ]
    rows = json.loads(tc.cli("topics", "describe", TRANSACTION_STATE_TOPIC, "--json").stdout)
    assert len(rows) == PARTITIONS


def test_a_zombie_producer_is_fenced_by_a_new_instance(tc: Cluster) -> None:
    from confluent_kafka import KafkaException

    zombie = producer(tc, "fenced-id")
    zombie.begin_transaction()
    zombie.produce("out", b"zombie-open", partition=1)
    zombie.flush(DEADLINE_S)
    fresh = producer(tc, "fenced-id")  # aborts the zombie's open transaction
    fresh.begin_transaction()
    fresh.produce("out", b"fresh", partition=1)
    fresh.commit_transaction(DEADLINE_S)
    with pytest.raises(KafkaException) as exc:
        zombie.produce("out", b"zombie-late", partition=1)
        zombie.commit_transaction(DEADLINE_S)
    assert exc.value.args[0].fatal(), exc.value  # fenced: the producer cannot go on
    assert "fenced" in str(exc.value).lower() or "epoch" in str(exc.value).lower(), exc.value
    values = read_all(tc, "out", "read_committed")
    assert b"fresh" in values and b"zombie-open" not in values and b"zombie-late" not in values


def test_an_open_transaction_past_its_timeout_is_aborted(tc: Cluster) -> None:
    hung = producer(tc, "hung", **{"transaction.timeout.ms": 2000})
    hung.begin_transaction()
    hung.produce("in", b"hung-record", partition=0)
    hung.flush(DEADLINE_S)
    other = producer(tc, "after-hung")
    other.begin_transaction()
    other.produce("in", b"after-hung", partition=0)
    other.commit_transaction(DEADLINE_S)
    # The LSO stays at the hung transaction until the coordinator aborts it.
    wait_until(
        lambda: b"after-hung" in read_all(tc, "in", "read_committed"),
        timeout_s=DEADLINE_S, what="the hung transaction aborted by its timeout",
    )  # fmt: skip
    assert b"hung-record" not in read_all(tc, "in", "read_committed")
    assert any(e.get("event") == "txn_timed_out" for e in all_events(tc))


def all_events(c: Cluster) -> list[dict[str, Any]]:
    names = [p.name for p in c.reload().processes if p.name.startswith("broker-")]
    return [e for n in names for e in c.log_events(n)]


def test_offsets_sent_to_a_transaction_are_committed_with_it(tc: Cluster) -> None:
    from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition

    p = producer(tc, "offsets-txn")
    group = "txn-group"
    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap(tc), "group.id": group,
         "enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )  # fmt: skip
    try:
        consumer.subscribe(["out"])
        wait_until(lambda: consumer.poll(0.5) is not None or bool(consumer.assignment()),
                   timeout_s=DEADLINE_S, what="an assignment")  # fmt: skip
        p.begin_transaction()
        p.produce("in", b"derived", partition=1)
        offsets = [TopicPartition("out", 0, 3), TopicPartition("out", 1, 2)]
        p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), DEADLINE_S)
        p.abort_transaction(DEADLINE_S)
        got = consumer.committed([TopicPartition("out", 0), TopicPartition("out", 1)], 10)
        assert [t.offset for t in got] == [OFFSET_INVALID, OFFSET_INVALID]  # aborted
        p.begin_transaction()
        p.produce("in", b"derived-2", partition=1)
        p.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), DEADLINE_S)
        p.commit_transaction(DEADLINE_S)

        def committed() -> list[int]:
            found = consumer.committed([TopicPartition("out", 0), TopicPartition("out", 1)], 10)
            return [t.offset for t in found]

        wait_until(lambda: committed() == [3, 2], timeout_s=DEADLINE_S, what="offsets [3, 2]")
    finally:
        consumer.close()


def test_describe_shows_the_last_stable_offset_and_the_open_transaction(tc: Cluster) -> None:
    create_topic(tc, "shown", partitions=1)
    p = producer(tc, "shown-id")
    p.begin_transaction()
    p.produce("shown", b"open", partition=0)
    p.flush(DEADLINE_S)

    def row() -> dict[str, Any]:
        (r,) = json.loads(tc.cli("topics", "describe", "shown", "--json").stdout)
        return dict(r)

    open_row = wait_until(
        lambda: (r := row())["open_transactions"] and r, timeout_s=DEADLINE_S,
        what="the open transaction in describe",
    )  # fmt: skip
    hw = next(
        s["high_watermark"] for s in open_row["replicas_state"] if s["broker"] == open_row["leader"]
    )
    assert open_row["last_stable_offset"] == 0 < hw
    assert [t["first_offset"] for t in open_row["open_transactions"]] == [0]
    text = tc.cli("topics", "describe", "shown").stdout
    assert "\tLastStableOffset: 0\tOpenTransactions: " in text
    p.commit_transaction(DEADLINE_S)
    wait_until(
        lambda: (r := row())["open_transactions"] == [] and r["last_stable_offset"] == 2,
        timeout_s=DEADLINE_S, what="the LSO past the commit marker",
    )  # fmt: skip
