"""Exactly-once consume-transform-produce across broker deaths (issue 29, section 3): a
confluent-kafka read_committed consumer and a transactional producer that sends the consumer's
offsets to each transaction, while the transaction coordinator's broker, the group
coordinator's broker and an output partition's leader are SIGKILLed in turn (each restarted
before the next): every input record's output appears exactly once to read_committed.
Kafka's own test: TransactionsBounceTest (testBrokerFailure), with the kills aimed."""

from __future__ import annotations

import json
import queue
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from minibroker import localcluster
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.types import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import create_topic, kafka_bootstrap, leader_of
from tests.kafka_clients.reading import READER, read_to_end

pytestmark = pytest.mark.integration

DEADLINE_S = 90.0
# How long one transactional call may block before its producer is given up (HUNG_CALL_S).
HUNG_CALL_S = 20.0
PARTITIONS = 5
INPUTS = 240
GROUP, TID = "eos", "eos-tx"


@pytest.fixture(scope="module")
def ec(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("eos") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1", "--set", "group.initial.rebalance.delay.ms=0",
        "--set", "zookeeper.session.timeout.ms=2000",
        "--set", f"offsets.topic.num.partitions={PARTITIONS}",
        "--set", f"transaction.state.log.num.partitions={PARTITIONS}",
    ) as c:  # fmt: skip
        create_topic(c, "eos-in", partitions=2)
        create_topic(c, "eos-out", partitions=2)
        yield c


def full_isr(c: Cluster) -> bool:
    for topic in ("eos-in", "eos-out", OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC):
        done = c.cli("topics", "describe", topic, "--json", check=False)
        if done.returncode != 0:
            return False
        if any(len(r["isr"]) != 3 for r in json.loads(done.stdout)):
            return False
    return True


class HungCall(Exception):
    """A client call still blocked past its deadline."""


def bounded(call: Any, limit_s: float = HUNG_CALL_S) -> None:
    """Run a blocking client call on a thread and give up on it after `limit_s`. librdkafka
    (2.16) can block in send_offsets_to_transaction past its timeout when the group
    coordinator it cached has left the metadata, as a SIGKILLed broker does, until some other
    broker connection changes state (confluentinc/librdkafka#5511, #5456: the coordinator
    request's timeout is never checked). An application then does what it does with any
    wedged producer: a new instance with the same transactional id fences it."""
    outcome: queue.SimpleQueue[BaseException | None] = queue.SimpleQueue()

    def run() -> None:
        try:
            call()
            outcome.put(None)
        except BaseException as exc:  # handed to the caller's thread
            outcome.put(exc)

    threading.Thread(target=run, daemon=True).start()
    try:
        error = outcome.get(timeout=limit_s)
    except queue.Empty:
        raise HungCall(f"blocked over {limit_s:.0f} s") from None
    if error is not None:
        raise error


class Pipeline:
    """The consume-transform-produce loop, recovering as an application must: a retriable
    error is retried, an abortable one aborts and rewinds to the committed offsets, a fatal
    one (fenced) or a call that hangs starts a new producer with the same transactional id."""

    def __init__(self, c: Cluster) -> None:
        from confluent_kafka import Consumer

        self.c = c
        self.consumer = Consumer(
            {"bootstrap.servers": kafka_bootstrap(c), "group.id": GROUP,
             "isolation.level": "read_committed", "enable.auto.commit": False,
             "auto.offset.reset": "earliest", "session.timeout.ms": 6000}
        )  # fmt: skip
        self.consumer.subscribe(["eos-in"])
        self.producer = self._new_producer()
        self.transactions = self.aborts = 0
        self.fatal: list[str] = []
        self.retried: list[str] = []

    def _new_producer(self) -> Any:
        from confluent_kafka import Producer

        p = Producer(
            {"bootstrap.servers": kafka_bootstrap(self.c), "transactional.id": TID,
             "transaction.timeout.ms": 20_000}
        )  # fmt: skip
        p.init_transactions(DEADLINE_S)
        return p

    def step(self) -> None:
        from confluent_kafka import KafkaException

        messages = [m for m in self.consumer.consume(20, 1.0) if not m.error()]
        if not messages:
            return
        try:
            self.producer.begin_transaction()
            for m in messages:
                self.producer.produce("eos-out", b"out-" + (m.value() or b""),
                                      partition=m.partition())  # fmt: skip
            offsets = self.consumer.position(self.consumer.assignment())
            meta = self.consumer.consumer_group_metadata()
            self._retrying(lambda: self.producer.send_offsets_to_transaction(offsets, meta, 10))
            self._retrying(lambda: self.producer.commit_transaction(10))
            self.transactions += 1
        except KafkaException as exc:
            self.aborts += 1
            self._abort(exc.args[0])
            self._rewind()
        except HungCall as exc:  # the wedged instance is left behind, fenced by the new one
            self.aborts += 1
            self.fatal.append(f"producer abandoned: {exc}")
            self.producer = self._new_producer()
            self._rewind()

    def _abort(self, err: Any) -> None:
        from confluent_kafka import KafkaException

        if err.txn_requires_abort():
            try:
                self._retrying(lambda: self.producer.abort_transaction(10))
                return
            except KafkaException as exc:
                err = exc.args[0]
            except HungCall as exc:
                err = exc
        # Fatal (fenced: e.g. the coordinator aborted the transaction at its timeout): a new
        # instance takes over the transactional id, as an application must.
        self.fatal.append(str(err))
        self.producer = self._new_producer()

    def _retrying(self, call: Any) -> None:
        from confluent_kafka import KafkaException

        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                bounded(call)
                return
            except KafkaException as exc:
                if not exc.args[0].retriable() or time.monotonic() > deadline:
                    raise
                self.retried.append(f"{time.time():.1f} {exc.args[0]}")
                time.sleep(0.2)

    def _rewind(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        for tp in self.consumer.committed(self.consumer.assignment(), 30):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))

    def committed_total(self) -> int:
        from confluent_kafka import TopicPartition

        wanted = [TopicPartition("eos-in", p) for p in (0, 1)]
        try:
            found = self.consumer.committed(wanted, 10)
        except Exception:
            return -1
        return sum(max(t.offset, 0) for t in found)

    def close(self) -> None:
        self.consumer.close()


def read_committed(c: Cluster, topic: str) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer(
        {"bootstrap.servers": kafka_bootstrap(c), "group.id": f"check-{uuid.uuid4().hex[:8]}",
         "isolation.level": "read_committed", **READER}
    )  # fmt: skip
    consumer.subscribe([topic])
    try:
        return [m.value() or b"" for m in read_to_end(consumer, 60.0)]
    finally:
        consumer.close()


def test_every_input_is_output_exactly_once_while_coordinators_and_leaders_die(
    ec: Cluster,
) -> None:
    from confluent_kafka import Producer

    source = Producer({"bootstrap.servers": kafka_bootstrap(ec), "enable.idempotence": True})
    for i in range(INPUTS):
        source.produce("eos-in", b"in-%d" % i, partition=i % 2)
    assert source.flush(DEADLINE_S) == 0
    victims = [
        ("transaction coordinator", TRANSACTION_STATE_TOPIC, partition_for(TID, PARTITIONS)),
        ("group coordinator", OFFSETS_TOPIC, partition_for(GROUP, PARTITIONS)),
        ("output partition leader", "eos-out", 0),
    ]
    pipeline = Pipeline(ec)
    killed: list[str] = []
    try:
        deadline = time.monotonic() + 4 * DEADLINE_S
        while pipeline.committed_total() < INPUTS:
            assert time.monotonic() < deadline, (
                f"stuck at {pipeline.committed_total()}; retried: {pipeline.retried[-20:]}"
            )
            pipeline.step()
            done = pipeline.committed_total()
            if victims and done >= INPUTS * (len(killed) + 1) // 4:
                what, topic, partition = victims.pop(0)
                if killed:  # the previous victim back, and every ISR whole, first
                    ec.cli("cluster", "start", killed[-1])
                    wait_until(lambda: full_isr(ec), timeout_s=DEADLINE_S, what="full ISRs")
                name = f"broker-{leader_of(ec, topic, partition)}"
                localcluster.send(ec.reload(), name, "kill")
                killed.append(name)
    finally:
        pipeline.close()
        for name in killed[-1:]:
            ec.cli("cluster", "start", name, check=False)
    assert len(killed) == 3
    outputs = Counter(read_committed(ec, "eos-out"))
    expected = Counter(b"out-in-%d" % i for i in range(INPUTS))
    duplicates = {v: n for v, n in outputs.items() if n > 1}
    missing = expected - outputs
    assert not duplicates and not missing, (
        f"{len(duplicates)} duplicated, {len(missing)} missing "
        f"(after {pipeline.transactions} commits, {pipeline.aborts} aborts, "
        f"fatal errors: {pipeline.fatal})"
    )
    assert outputs == expected
