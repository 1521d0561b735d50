"""The history recorder on real clients and a real cluster (issue 39 §3): confluent-kafka,
kafka-python and aiokafka record what they did, transactions included, across a leader's
crash, and the checker finds nothing wrong in what a correct client saw; the same history
with one record dropped from the reads is reported as a lost write, with the crash in the
report's timeline."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from minibroker.history import ClientHistory, HistoryRecorder, Read, check, load
from minibroker.testing import Cluster, leader_of

pytestmark = pytest.mark.integration

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "zookeeper.session.timeout.ms": 6000}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(settings=SETTINGS) as c:
        c.create_topic("events", partitions=2, replication_factor=3, min_insync_replicas=2)
        c.create_topic("txns", partitions=2, replication_factor=3, min_insync_replicas=2)
        yield c


def read_all(recorder: HistoryRecorder, c: Cluster, topic: str, n: int, **conf: Any) -> int:
    """Reads `topic` with a recording consumer until `n` records came (or 60 s passed),
    committing synchronously as it goes; returns how many came."""
    consumer = recorder.consumer(
        c.confluent_config(group_id=f"check-{topic}", auto_offset_reset="earliest",
                           enable_auto_commit=False, **conf)
    )  # fmt: skip
    consumer.subscribe([topic])
    got = 0
    try:
        for _ in range(120):
            messages = consumer.consume(500, 0.5)
            got += sum(m.error() is None for m in messages)
            if messages:
                consumer.commit(asynchronous=False)
            if got >= n:
                break
    finally:
        consumer.close()
    return got


def test_confluent_clients_across_a_leader_crash(cluster: Cluster, tmp_path: Path) -> None:
    recorder = HistoryRecorder(tmp_path / "app.jsonl")
    producer = recorder.producer(cluster.confluent_config(acks="all", message_timeout_ms=30_000))
    for i in range(200):
        producer.produce("events", b"v%d" % i, key=b"k%d" % i, partition=i % 2)
        if i == 100:
            producer.flush(30)
            killed = cluster.kill(leader_of("events", 0))
    assert producer.flush(60) == 0
    # Back before any group is used: __consumer_offsets is created with RF 3, which needs
    # three live brokers (Kafka's offsets.topic.replication.factor too).
    cluster.start(killed.node)
    assert read_all(recorder, cluster, "events", 200) >= 200
    recorder.close()

    mine = {b"v%d" % i for i in range(200)}  # other tests' records in `events` are not ours
    everything = load([tmp_path / "app.jsonl"])  # what the file kept equals what memory kept
    assert everything.summary()["sends"] == recorder.history().summary()["sends"]
    history = ClientHistory(
        tuple(o for o in everything.ops if not isinstance(o, Read) or o.value in mine)
    )
    assert history.summary()["acknowledged"] == 200 and history.summary()["commits"] > 0
    timeline = cluster.events()
    result = check(history, timeline=timeline)
    assert result.ok, result.text()

    # One acknowledged record taken out of what the consumer saw: the checker reports it lost
    # and quotes the cluster's events around its acknowledgement.
    victim = next(o for o in history.reads if o.partition == 0 and o.offset == 60)
    doctored = ClientHistory(tuple(o for o in history.ops if o != victim))
    lost = check(doctored, timeline=timeline)
    assert [a.kind for a in lost.failures] == ["lost-write"], lost.text()
    assert f"events-0 offset 60: {(victim.value or b'').decode()!r} acknowledged" in lost.text()
    cluster.wait_until_fully_replicated("events")


def test_transactions_and_read_committed_are_recorded(cluster: Cluster) -> None:
    recorder = HistoryRecorder()
    producer = recorder.producer(cluster.confluent_config(transactional_id="history-txn"))
    producer.init_transactions(30)
    for n, finish in enumerate(("commit", "abort", "commit")):
        producer.begin_transaction()
        for i in range(10):
            producer.produce("txns", b"t%d-%d" % (n, i), partition=i % 2)
        producer.flush(30)  # in the log before the abort (else librdkafka purges them)
        getattr(producer, f"{finish}_transaction")(30)
    assert read_all(recorder, cluster, "txns", 20, isolation_level="read_committed") == 20
    history = recorder.history()
    assert [t.outcome for t in history.transactions.values()] == [
        "committed",
        "aborted",
        "committed",
    ]
    result = check(history, delivery="exactly-once")
    assert result.ok, result.text()
    # Had the consumer been handed an aborted record, read_committed: an aborted read.
    aborted = next(s for s in history.sends if s.txn.endswith("#2") and s.offset >= 0)
    planted = Read(
        "planted", "g", "txns", aborted.partition, aborted.offset, None, aborted.value, 1, True
    )
    found = check(ClientHistory.of(history.ops, [planted]), delivery="exactly-once")
    assert "aborted-read" in found.kinds(), found.text()


def test_kafka_python_and_aiokafka_record_too(cluster: Cluster) -> None:
    recorder = HistoryRecorder()
    producer = recorder.kafka_python_producer(**cluster.kafka_python_config(acks="all"))
    for i in range(20):
        producer.send("events", b"kp%d" % i, partition=0)
    producer.flush(30)
    producer.close()

    async def with_aiokafka() -> None:
        p = recorder.aiokafka_producer(**cluster.aiokafka_config(acks="all"))
        await p.start()
        try:
            for i in range(20):
                await p.send_and_wait("events", b"ak%d" % i, partition=1)
        finally:
            await p.stop()
        c = recorder.aiokafka_consumer(
            "events", **cluster.aiokafka_config(group_id="aio-check", auto_offset_reset="earliest",
                                                enable_auto_commit=False)
        )  # fmt: skip
        await c.start()
        try:
            seen = 0
            for _ in range(60):
                batches = await c.getmany(timeout_ms=500)
                seen += sum(len(b) for b in batches.values())
                if batches:
                    await c.commit()
                if any(r.value == b"kp19" for r in recorder.history().reads) and any(
                    r.value == b"ak19" for r in recorder.history().reads
                ):
                    break
        finally:
            await c.stop()

    asyncio.run(with_aiokafka())
    history = recorder.history()
    ours = [s for s in history.sends if s.value and s.value[:2] in (b"kp", b"ak")]
    assert len(ours) == 40 and all(s.outcome == "ok" and s.offset >= 0 for s in ours)
    assert {b"kp19", b"ak19"} <= {r.value for r in history.reads}
    assert history.commits and history.commits[-1].group == "aio-check"
    # The events topic holds records of the other tests' producers: only ours are checked.
    mine = ClientHistory(
        tuple(
            o
            for o in history.ops
            if not isinstance(o, Read) or (o.value or b"")[:2] in (b"kp", b"ak")
        )
    )
    result = check(mine)
    assert result.ok, result.text()
    assert dataclasses.asdict(history.sends[0])["client"].startswith("producer-")
