"""Compacted topics on one cluster of real processes shared by the module, the cleaner run every
200 ms (Kafka's LogCleanerIntegrationTest, LogCleanerLagIntegrationTest): every replica cleans
its own log; kafka-python's and confluent-kafka's consumers read a compacted partition with its
offset gaps and see each key's last value; tombstones go once past the delete horizon; and under
SIGKILLed leaders and cleaners, for every key the last acknowledged value (or its absence after
a tombstone) is what a consumer reading from the start sees; a transactional topic loses its
aborted records and its spent markers, and read_committed still sees each key's last committed
value. The checker reads with kafka-python and knows nothing of the cleaner."""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from contextlib import closing

import pytest

from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk
from tests.integration.kafka_wire import kafka_bootstrap, leader_of

pytestmark = pytest.mark.integration

WAIT_S = 40
Value = bytes | None


@pytest.fixture(scope="module")
def cc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("compaction") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1",
        "--set", "zookeeper.session.timeout.ms=3000",
        "--set", "log.cleaner.backoff.ms=200",
        "--set", "log.retention.check.interval.ms=500",
        "--set", "log.segment.delete.delay.ms=200",
        "--set", "offsets.topic.num.partitions=3",
        "--set", "transaction.state.log.num.partitions=3",
        # A window between a clean's *.swap files and its swap, to SIGKILL a broker in.
        "--set", "minibroker.test.cleaner.swap.delay.ms=1500",
    ) as c:  # fmt: skip
        yield c


def create(c: Cluster, topic: str, *configs: str) -> None:
    base = ("cleanup.policy=compact", "min.insync.replicas=2", "segment.bytes=8192",
            "min.cleanable.dirty.ratio=0.01")  # fmt: skip
    args = [a for kv in (*base, *configs) for a in ("--config", kv)]
    c.cli("topics", "create", topic, "--partitions", "1", "--replication-factor", "3",
          *args, "--wait")  # fmt: skip


def produce(
    c: Cluster, topic: str, items: list[tuple[bytes, Value]]
) -> dict[int, tuple[bytes, Value]]:
    """Each record acknowledged by the ISR, by offset."""
    from kafka import KafkaProducer

    acked = {}
    # Batches of at most 4 KiB: a batch larger than segment.bytes is refused (as by Kafka).
    producer = KafkaProducer(
        bootstrap_servers=kafka_bootstrap(c).split(","), acks="all", batch_size=4096
    )
    with closing(producer) as p:
        futures = [(p.send(topic, key=k, value=v), k, v) for k, v in items]
        p.flush(30)
        for f, k, v in futures:
            acked[f.get(timeout=30).offset] = (k, v)
    return acked


def read_kafka_python(c: Cluster, topic: str) -> list[tuple[int, bytes, Value]]:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTp

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(c).split(","), enable_auto_commit=False,
        consumer_timeout_ms=10_000, auto_offset_reset="earliest",
    )  # fmt: skip
    tp = KafkaTp(topic, 0)
    with closing(consumer):
        consumer.assign([tp])
        consumer.seek_to_beginning()
        # Up to the HW: the record before it is in the active segment, never cleaned away.
        end = consumer.end_offsets([tp])[tp]
        out: list[tuple[int, bytes, Value]] = []
        for m in consumer if end > 0 else ():
            out.append((m.offset, m.key, m.value))
            if m.offset >= end - 1:
                break
        return out


def read_confluent(c: Cluster, topic: str) -> list[tuple[int, bytes, Value]]:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": kafka_bootstrap(c), "group.id": f"g-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})  # fmt: skip
    try:
        _, end = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        out: list[tuple[int, bytes, Value]] = []
        deadline = time.monotonic() + 10
        while end > 0 and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is None or m.error():
                continue
            out.append((int(m.offset() or 0), bytes(m.key() or b""), m.value()))
            if out[-1][0] >= end - 1:  # the HW's last record: nothing after it
                break
        return out
    finally:
        consumer.close()


def last_values(read: list[tuple[int, bytes, Value]]) -> dict[bytes, Value]:
    """The consumer's view: each key's last value, a tombstone removing the key."""
    out: dict[bytes, Value] = {}
    for _, k, v in read:
        if v is None:
            out.pop(k, None)
        else:
            out[k] = v
    return out


def cleaned_to_the_active_segment(c: Cluster, topic: str) -> set[str]:
    """The brokers whose cleaner has cleaned `topic`-0 up to its active segment (the largest
    base offset among the replica's segment files): all a clean can reach once nothing is
    produced. A first clean may stop short of it (it started while segments still rolled)."""
    names = set()
    for p in c.reload().by_role("broker"):
        bases = [int(f.stem) for f in (c.dir / p.name / "data" / f"{topic}-0").glob("*.log")]
        reached = [e["cleaned_up_to"] for e in c.log_events(p.name)
                   if e["event"] == "log_cleaned" and e.get("tp") == f"{topic}-0"]  # fmt: skip
        if bases and reached and max(reached) >= max(bases):
            names.add(p.name)
    return names


def cleaned_by(c: Cluster, topic: str) -> set[str]:
    names = set()
    for p in c.reload().by_role("broker"):
        if any(e["event"] == "log_cleaned" and e.get("tp") == f"{topic}-0" and e["segments"]
               for e in c.log_events(p.name)):  # fmt: skip
            names.add(p.name)
    return names


def test_every_replica_cleans_and_kafka_consumers_read_the_gaps(cc: Cluster) -> None:
    """LogCleanerIntegrationTest.cleanerTest: the last value of each key at its offset; the
    consumers step over the offsets the cleaner removed."""
    create(cc, "compacted")
    items: list[tuple[bytes, Value]] = [
        (b"k%d" % (i % 20), b"v%d-" % i + b"x" * 50) for i in range(400)
    ]
    acked = produce(cc, "compacted", items)
    produce(cc, "compacted", [(b"roll", b"y" * 3000)])  # the dirty section is no longer active
    wait_until(lambda: len(cleaned_to_the_active_segment(cc, "compacted")) == 3, timeout_s=WAIT_S,
               what="each of the three replicas to clean its log")  # fmt: skip
    last_offset = {k: o for o, (k, _) in sorted(acked.items())}
    for read in (read_kafka_python(cc, "compacted"), read_confluent(cc, "compacted")):
        kept = {k: (o, v) for o, k, v in read if k != b"roll"}
        assert kept == {k: (last_offset[k], acked[last_offset[k]][1]) for k in last_offset}
        assert len(read) < 100  # 400 updates of 20 keys, cleaned


def test_tombstones_are_read_until_the_delete_horizon_then_go(cc: Cluster) -> None:
    """LogCleanerTest.testCleaningWithDeletes on the brokers: delete.retention.ms=0, so a
    tombstone goes with the clean after the one that first sees it."""
    create(cc, "tombs", "delete.retention.ms=0")
    produce(cc, "tombs", [(b"a", b"1"), (b"b", b"2"), (b"a", None), (b"c", b"3")])
    fills = iter(range(1000))

    def tombstone_gone() -> bool:
        # More records roll more segments, and each clean makes the tombstone's section older.
        produce(cc, "tombs", [(b"fill%d" % next(fills), b"z" * 3000)])
        return all(k != b"a" for _, k, _ in read_kafka_python(cc, "tombs"))

    wait_until(tombstone_gone, timeout_s=WAIT_S, interval_s=0.3,
               what="the tombstone of key a to be cleaned away")  # fmt: skip
    assert last_values(read_kafka_python(cc, "tombs"))[b"b"] == b"2"


def test_transactions_on_a_compacted_topic_lose_aborted_records_and_spent_markers(
    cc: Cluster,
) -> None:
    """LogCleanerTest's marker tests on the brokers (delete.retention.ms=0): rounds of a
    committed and an aborted transaction over the same keys; every replica's cleaner removes
    the aborted records and then markers whose transactions have nothing left, and a
    read_committed consumer still sees each key's last committed value."""
    from confluent_kafka import Consumer, Producer, TopicPartition

    create(cc, "txns", "delete.retention.ms=0")
    p = Producer({"bootstrap.servers": kafka_bootstrap(cc), "transactional.id": "compact-tx"})
    p.init_transactions(WAIT_S)
    for round_ in range(6):
        for outcome in ("c", "a"):
            p.begin_transaction()
            for k in range(10):
                p.produce("txns", key=b"k%d" % k, value=b"%s%d" % (outcome.encode(), round_))
            if outcome == "c":
                p.commit_transaction(WAIT_S)
            else:
                p.flush(WAIT_S)  # written, then aborted (not purged unsent by the client)
                p.abort_transaction(WAIT_S)
    fills = iter(range(1000))

    def markers_removed() -> set[str]:
        return {
            b.name for b in cc.reload().by_role("broker")
            if sum(e.get("markers_removed", 0) for e in cc.log_events(b.name)
                   if e["event"] == "log_cleaned" and e.get("tp") == "txns-0") >= 10
        }  # fmt: skip

    def cleaned() -> bool:
        produce(cc, "txns", [(b"fill%d" % next(fills), b"z" * 3000)])  # rolls, ages the rest
        return len(markers_removed()) == 3

    wait_until(cleaned, timeout_s=2 * WAIT_S, interval_s=0.3,
               what="every replica's cleaner to remove spent markers")  # fmt: skip
    uncommitted = [(k, v) for _, k, v in read_kafka_python(cc, "txns") if k.startswith(b"k")]
    assert not [v for _, v in uncommitted if v is not None and v.startswith(b"a")]
    consumer = Consumer(
        {
            "bootstrap.servers": kafka_bootstrap(cc),
            "group.id": "txns-check",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition("txns", 0, 0)])
        seen: dict[bytes, bytes] = {}
        deadline = time.monotonic() + WAIT_S
        while len(seen) < 10 or any(v != b"c5" for v in seen.values()):
            assert time.monotonic() < deadline, f"read_committed saw {seen}"
            m = consumer.poll(0.5)
            if m is not None and not m.error() and (m.key() or b"").startswith(b"k"):
                seen[bytes(m.key() or b"")] = bytes(m.value() or b"")
    finally:
        consumer.close()


def test_killed_leaders_and_cleaners_lose_no_acknowledged_last_value(cc: Cluster) -> None:
    """A keyed workload with updates and deletes while the leader (whose cleaner runs every
    200 ms on 8 KiB segments) is SIGKILLed again and again: reading from the start, every key
    ends at its last acknowledged value, or at a later write whose answer was lost, or absent
    after a tombstone."""
    from kafka import KafkaProducer

    create(cc, "faults", "delete.retention.ms=0")
    rng = random.Random(27)
    sent: dict[bytes, list[tuple[Value, bool]]] = {}  # per key: (value, acknowledged) in order
    producer = KafkaProducer(
        bootstrap_servers=kafka_bootstrap(cc).split(","), acks="all", retries=5,
        request_timeout_ms=5000, max_in_flight_requests_per_connection=1, batch_size=4096,
    )  # fmt: skip
    with closing(producer):
        for round_ in range(4):
            pending = []
            for i in range(150):
                key = b"k%d" % rng.randrange(30)
                value = None if rng.random() < 0.15 else b"r%d-%d" % (round_, i) + b"x" * 40
                pending.append((key, value, producer.send("faults", key=key, value=value)))
            producer.flush(30)
            for key, value, future in pending:
                try:
                    future.get(timeout=30)
                    sent.setdefault(key, []).append((value, True))
                except Exception:
                    sent.setdefault(key, []).append((value, False))
            victim = leader_of(cc, "faults", 0)
            cc.cli("cluster", "kill", f"broker-{victim}")

            def moved(v: int = victim) -> bool:
                return leader_of(cc, "faults", 0) not in (v, -1)

            wait_until(moved, timeout_s=WAIT_S, what="a new leader")
            cc.cli("cluster", "restart", f"broker-{victim}")
    wait_until(lambda: sorted(_isr(cc, "faults")) == [1, 2, 3], timeout_s=WAIT_S,
               what="every replica back in the ISR")  # fmt: skip
    seen = last_values(read_kafka_python(cc, "faults"))
    wrong = {}
    for key, writes in sent.items():
        last_acked = max((i for i, (_, ok) in enumerate(writes) if ok), default=-1)
        allowed = {writes[i][0] for i in range(max(last_acked, 0), len(writes))
                   if i == last_acked or not writes[i][1]}  # fmt: skip
        if last_acked < 0:
            allowed.add(None)  # nothing acknowledged: absent is fine too
        if seen.get(key) not in allowed:
            wrong[key] = (seen.get(key), allowed)
    assert not wrong, f"{len(wrong)} keys end at a value that was not their last: {wrong}"
    assert cleaned_by(cc, "faults"), "the cleaner never ran on the topic"


def test_a_broker_killed_between_a_cleans_write_and_its_swap_recovers_the_clean(
    cc: Cluster,
) -> None:
    """LogCleanerTest.testRecoveryAfterCrash on a real broker: SIGKILLed with the cleaned
    segments written as *.swap and not yet swapped in; at restart recovery swaps them in, and
    its log holds each key's last value."""
    from pathlib import Path

    from minibroker.core import records

    create(cc, "midclean")
    acked = produce(cc, "midclean", [(b"k%d" % (i % 10), b"v%d" % i) for i in range(300)])
    produce(cc, "midclean", [(b"roll", b"y" * 3000)] * 3)
    victim = next(b for b in (1, 2, 3) if b != leader_of(cc, "midclean", 0))

    def written() -> bool:
        return any(e["event"] == "log_clean_written" and e.get("tp") == "midclean-0"
                   for e in cc.log_events(f"broker-{victim}"))  # fmt: skip

    wait_until(written, timeout_s=WAIT_S, interval_s=0.02, what="the clean's swap files")
    cc.cli("cluster", "kill", f"broker-{victim}")
    data = Path(cc.reload().process(f"broker-{victim}").data_dir) / "data" / "midclean-0"
    assert any(f.name.endswith(".log.swap") for f in data.iterdir()), sorted(data.iterdir())
    cc.cli("cluster", "restart", f"broker-{victim}")

    def repairs() -> list[str]:
        return [r for e in cc.log_events(f"broker-{victim}") if e["event"] == "log_recovered"
                and e["tp"] == "midclean-0" for r in e["repairs"]]  # fmt: skip

    wait_until(lambda: any("swapped in" in r for r in repairs()), timeout_s=WAIT_S,
               what=f"broker {victim} to open the log and finish the swap")  # fmt: skip
    wait_until(lambda: sorted(_isr(cc, "midclean")) == [1, 2, 3], timeout_s=WAIT_S,
               what=f"broker {victim} in the ISR")  # fmt: skip
    on_disk = b"".join(f.read_bytes() for f in sorted(data.glob("*.log")))
    last = {r.key: (r.offset, r.value) for r in records.decode_records(on_disk)}
    want = {k: (o, v) for o, (k, v) in sorted(acked.items())}
    assert {k: last[k] for k in want} == want


def _isr(c: Cluster, topic: str) -> list[int]:
    from tests.integration.conftest import describe_partition

    isr: list[int] = describe_partition(c, topic)["isr"]
    return isr
