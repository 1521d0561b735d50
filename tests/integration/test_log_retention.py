"""Logs that live for days (issue 27) on one cluster of real processes shared by the module,
with retention checked every 500 ms: retention by time and by size on every replica (Kafka's
LogTest cases, run by the brokers' LogManager), DeleteRecords from kafka-python's and
confluent-kafka's admin clients and the CLI (PlaintextAdminIntegrationTest's
testLogStartOffsetCheckpoint, testLogStartOffsetAfterDeleteRecords,
testReplicaCanFetchFromLogStartOffsetAfterDeleteRecords), reads below the log start offset,
`auto.offset.reset` against it, and a follower that was down while its leader's log start moved
on starting over from it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from broker.log.checkpoints import LOG_START_OFFSET_CHECKPOINT, parse_offsets
from minibroker.core.types import TopicPartition
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, cluster_with_zk, describe_partition
from tests.integration.kafka_wire import kafka_bootstrap, leader_of

pytestmark = pytest.mark.integration

WAIT_S = 30


@pytest.fixture(scope="module")
def rc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    d = tmp_path_factory.mktemp("retention") / "cluster"
    with cluster_with_zk(
        d, "--controllers", "1",
        "--set", "zookeeper.session.timeout.ms=3000",
        "--set", "log.retention.check.interval.ms=500",
        "--set", "log.segment.delete.delay.ms=200",
        "--set", "log.flush.start.offset.checkpoint.interval.ms=500",
    ) as c:  # fmt: skip
        yield c


def create(c: Cluster, topic: str, *configs: str) -> None:
    args = [a for kv in ("min.insync.replicas=2", *configs) for a in ("--config", kv)]
    c.cli("topics", "create", topic, "--partitions", "1", "--replication-factor", "3",
          *args, "--wait")  # fmt: skip


def produce(
    c: Cluster, topic: str, count: int, size: int = 100, start: int = 0
) -> dict[int, bytes]:
    """`count` records acknowledged by every ISR member; their values by offset."""
    from kafka import KafkaProducer

    acked = {}
    with closing(
        KafkaProducer(bootstrap_servers=kafka_bootstrap(c).split(","), acks="all", linger_ms=0)
    ) as producer:
        for i in range(start, start + count):
            value = b"%08d" % i + b"x" * (size - 8)
            md = producer.send(topic, value=value).get(timeout=30)
            acked[md.offset] = value
    return acked


def replicas(c: Cluster, topic: str) -> list[dict[str, Any]]:
    states: list[dict[str, Any]] = describe_partition(c, topic)["replicas_state"]
    return states


def starts(c: Cluster, topic: str) -> list[int | None]:
    return [s["log_start_offset"] for s in replicas(c, topic)]


def segment_files(c: Cluster, topic: str) -> dict[int, list[str]]:
    out = {}
    for p in c.reload().by_role("broker"):
        assert p.id is not None
        d = Path(p.data_dir) / "data" / f"{topic}-0"
        out[p.id] = sorted(f.name for f in d.iterdir() if ".log" in f.name)
    return out


def consume_all(c: Cluster, topic: str, reset: str = "earliest", from_offset: int = 0) -> Any:
    """Every record from `from_offset` on, with `auto_offset_reset`; the list, or the error."""
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTp

    consumer = KafkaConsumer(
        bootstrap_servers=kafka_bootstrap(c).split(","), enable_auto_commit=False,
        consumer_timeout_ms=3000, auto_offset_reset=reset,
    )  # fmt: skip
    with closing(consumer):
        tp = KafkaTp(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, from_offset)
        return [(m.offset, m.value) for m in consumer]


def earliest(c: Cluster, topic: str) -> int:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KafkaTp

    with closing(KafkaConsumer(bootstrap_servers=kafka_bootstrap(c).split(","))) as consumer:
        offsets: dict[Any, int] = consumer.beginning_offsets([KafkaTp(topic, 0)])
        return next(iter(offsets.values()))


def events(c: Cluster, name: str, topic: str) -> list[dict[str, Any]]:
    found = []
    for p in c.reload().by_role("broker"):
        found += [e for e in c.log_events(p.name) if e["event"] == name
                  and str(e.get("tp", "")).startswith(f"{topic}-")]  # fmt: skip
    return found


# ---- retention by time and by size -------------------------------------------------------------


def test_time_retention_deletes_every_replicas_old_segments(rc: Cluster) -> None:
    """LogTest.shouldDeleteTimeBasedSegmentsReadyToBeDeleted, on the three replicas: once the
    records are older than retention.ms every segment goes (the log rolls first), the log start
    offset reaches the log end, the files are removed, and the partition takes new records."""
    create(rc, "timed", "segment.bytes=1024", "retention.ms=2000")
    produce(rc, "timed", 60)
    wait_until(lambda: starts(rc, "timed") == [60, 60, 60], timeout_s=WAIT_S,
               what="every replica's log start offset to reach 60")  # fmt: skip
    wait_until(
        lambda: all(files == [f"{60:020d}.log"] for files in segment_files(rc, "timed").values()),
        timeout_s=WAIT_S, what="the deleted segments' files to be removed",
    )  # fmt: skip
    deleted = events(rc, "segments_deleted", "timed")
    assert {e["role"] for e in deleted} == {"leader", "follower"}
    assert all(e["reasons"][0].startswith("retention time 2000 ms") for e in deleted)
    assert earliest(rc, "timed") == 60
    acked = produce(rc, "timed", 3, start=60)
    assert consume_all(rc, "timed") == sorted(acked.items())


def test_size_retention_keeps_each_replica_near_retention_bytes(rc: Cluster) -> None:
    """LogTest.shouldDeleteSizeBasedSegments: while a log exceeds retention.bytes by at least
    its oldest segment, that segment goes; what is left is read back whole from the start."""
    create(rc, "sized", "segment.bytes=2048", "retention.bytes=6144", "retention.ms=-1")
    acked = produce(rc, "sized", 300)

    def sizes() -> list[int]:
        out = []
        for p in rc.reload().by_role("broker"):
            d = Path(p.data_dir) / "data" / "sized-0"
            out.append(sum(f.stat().st_size for f in d.glob("*.log")))
        return out

    wait_until(lambda: all(s <= 6144 + 2048 for s in sizes()), timeout_s=WAIT_S,
               what="every replica within retention.bytes + one segment")  # fmt: skip
    start = earliest(rc, "sized")
    assert 0 < start < 300
    read = consume_all(rc, "sized")
    assert read == [(o, acked[o]) for o in range(start, 300)]


# ---- DeleteRecords -----------------------------------------------------------------------------


def test_delete_records_from_kafka_python_moves_every_replicas_log_start(rc: Cluster) -> None:
    """PlaintextAdminIntegrationTest.testLogStartOffsetAfterDeleteRecords and
    testLogStartOffsetCheckpoint: the answer is the low watermark; every replica's start moves
    and is written to log-start-offset-checkpoint; reads below it are out of range."""
    from kafka import TopicPartition as KafkaTp
    from kafka.admin import KafkaAdminClient
    from kafka.errors import OffsetOutOfRangeError, PolicyViolationError

    create(rc, "dr", "segment.bytes=1024")
    acked = produce(rc, "dr", 50)
    with closing(KafkaAdminClient(bootstrap_servers=kafka_bootstrap(rc).split(","))) as admin:
        result = admin.delete_records({KafkaTp("dr", 0): 20}, timeout_ms=20_000)
        assert result[KafkaTp("dr", 0)]["low_watermark"] == 20
        assert starts(rc, "dr") == [20, 20, 20]  # the answer waited for every replica
        with pytest.raises(OffsetOutOfRangeError):
            admin.delete_records({KafkaTp("dr", 0): 51}, timeout_ms=5000)
        create(rc, "compacted", "cleanup.policy=compact")
        with pytest.raises(PolicyViolationError):
            admin.delete_records({KafkaTp("compacted", 0): 0}, timeout_ms=5000)
    assert earliest(rc, "dr") == 20
    assert consume_all(rc, "dr", "earliest", from_offset=5) == [
        (o, acked[o]) for o in range(20, 50)
    ]  # auto.offset.reset=earliest after OFFSET_OUT_OF_RANGE
    with pytest.raises(OffsetOutOfRangeError):
        consume_all(rc, "dr", "none", from_offset=5)

    def checkpointed() -> list[int | None]:
        out = []
        for p in rc.reload().by_role("broker"):
            path = Path(p.data_dir) / "data" / LOG_START_OFFSET_CHECKPOINT
            entries = parse_offsets(path.read_bytes()) if path.exists() else {}
            out.append(entries.get(TopicPartition("dr", 0)))
        return out

    wait_until(lambda: checkpointed() == [20, 20, 20], timeout_s=WAIT_S,
               what="log-start-offset-checkpoint to hold dr 0 20 on every broker")  # fmt: skip
    moved = events(rc, "log_start_offset_moved", "dr")
    assert len(moved) == 2 and {e["log_start_offset"] for e in moved} == {20}
    (deleted,) = events(rc, "records_deleted", "dr")
    assert deleted["log_start_offset"] == 20


def test_delete_records_from_confluent_kafka_and_the_cli_up_to_the_high_watermark(
    rc: Cluster,
) -> None:
    from confluent_kafka import TopicPartition as CkTp
    from confluent_kafka.admin import AdminClient

    create(rc, "dr2")
    produce(rc, "dr2", 30)
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap(rc)})
    futures = admin.delete_records([CkTp("dr2", 0, 10)], request_timeout=20)
    (future,) = futures.values()
    assert future.result(timeout=30).low_watermark == 10
    del admin
    out = rc.cli("topics", "delete-records", "dr2", "--offset", "-1").stdout
    assert "partition: dr2-0\tlow_watermark: 30" in out
    assert starts(rc, "dr2") == [30, 30, 30]
    bad = rc.cli("topics", "delete-records", "dr2", "--offset", "99", check=False)
    assert bad.returncode == 1 and "OFFSET_OUT_OF_RANGE" in bad.stdout
    spec = rc.dir / "offsets.json"
    spec.write_text(json.dumps({"partitions": [{"topic": "dr2", "partition": 0, "offset": 30}],
                                "version": 1}))  # fmt: skip
    assert (
        "low_watermark: 30"
        in rc.cli("topics", "delete-records", "--offset-json-file", str(spec)).stdout
    )


# ---- a follower that was away --------------------------------------------------------------------


def test_a_follower_down_while_the_start_moved_starts_over_from_the_leaders_start(
    rc: Cluster,
) -> None:
    """testReplicaCanFetchFromLogStartOffsetAfterDeleteRecords, with the follower down: the
    low watermark leaves a dead broker out; back, its fetch is out of range, it starts over at
    the leader's log start offset, catches up and rejoins the ISR."""
    create(rc, "away", "segment.bytes=1024")
    produce(rc, "away", 10)
    leader = leader_of(rc, "away", 0)
    follower = next(b for b in (1, 2, 3) if b != leader)
    rc.cli("cluster", "kill", f"broker-{follower}")
    wait_until(lambda: follower not in describe_partition(rc, "away")["isr"], timeout_s=WAIT_S,
               what=f"broker {follower} to leave the ISR")  # fmt: skip
    acked = produce(rc, "away", 90, start=10)
    rc.cli("topics", "delete-records", "away", "--offset", "80")
    wait_until(
        lambda: segment_files(rc, "away")[leader][0] != f"{0:020d}.log",
        timeout_s=WAIT_S, what="the leader's segments below 80 to be deleted",
    )  # fmt: skip
    rc.cli("cluster", "restart", f"broker-{follower}")
    wait_until(lambda: sorted(describe_partition(rc, "away")["isr"]) == [1, 2, 3],
               timeout_s=WAIT_S, what=f"broker {follower} to rejoin the ISR")  # fmt: skip
    own = next(s for s in replicas(rc, "away") if s["broker"] == follower)
    assert own["log_start_offset"] == 80 and own["log_end_offset"] == 100
    assert any(e["event"] == "follower_out_of_range" for e in rc.log_events(f"broker-{follower}"))
    assert consume_all(rc, "away") == [(o, acked[o]) for o in range(80, 100)]
