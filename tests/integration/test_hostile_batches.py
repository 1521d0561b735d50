"""Issue 15's data-loss defect, on real processes: a Produce whose batch has a correct CRC but
lies about its records is refused with Kafka's error, before a byte is written, on the leader;
no replica's log, log end offset or high watermark moves, the ISR stays, and every acknowledged
record still reads back — through our consumer and through kafka-python on the segment files."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from tests.hostile import batches as hb
from tests.integration.conftest import Cluster, describe_partition, segment_bytes, settled
from tests.integration.rpc import batch, produce

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords

pytestmark = pytest.mark.integration

TP = TopicPartition("t", 0)


def test_lying_batches_are_refused_and_nothing_moves(topic_t: Cluster) -> None:
    c = topic_t
    leader = describe_partition(c)["leader"]
    address = c.state.process(f"broker-{leader}").address
    acked = []
    for i in range(5):
        r = produce(address, TP, batch(b"acked-%d-a" % i, b"acked-%d-b" % i))
        assert r.error is ErrorCode.NONE, r
        acked += [b"acked-%d-a" % i, b"acked-%d-b" % i]
    before = settled(c, len(acked))  # every replica caught up, and knows it
    logs_before = segment_bytes(c)

    answers = {}
    for variant in hb.VARIANTS:
        answers[variant.name] = produce(address, TP, variant.make()).error
    assert answers == {v.name: v.code for v in hb.VARIANTS}

    after = describe_partition(c)
    assert after["isr"] == before["isr"] and after["leader_epoch"] == before["leader_epoch"]
    assert after["replicas_state"] == before["replicas_state"], "a LEO or HW moved"
    assert segment_bytes(c) == logs_before, "a byte was written"
    consumed = c.cli("consume", "t", "--from-beginning", "--until-hw", "--timeout-ms", "20000")
    assert consumed.stdout.split() == [v.decode() for v in acked]
    for b, data in logs_before.items():
        records = MemoryRecords(data)
        values = []
        while (kp := records.next_batch()) is not None:
            values += [r.value for r in kp]
        assert values == acked, f"broker {b}'s segment as kafka-python reads it"


def test_a_log_damaged_before_these_checks_reads_up_to_the_damage(topic_t: Cluster) -> None:
    """A segment already holding a lying batch (CRC right, 2 records, count 1), as logs written
    before the record walk may: recovery keeps it, and a consumer reads every record before it,
    then stops there with CORRUPT_MESSAGE naming its offset — nothing before it is lost, nothing
    after it is skipped silently."""
    c = topic_t
    c.cli("topics", "create", "d", "--partitions", "1", "--replication-factor", "1", "--wait")
    (p,) = json.loads(c.cli("topics", "describe", "d", "--json").stdout)
    broker = p["leader"]
    address = c.state.process(f"broker-{broker}").address
    for value in (b"a", b"b", b"c"):
        assert produce(address, TopicPartition("d", 0), batch(value)).error is ErrorCode.NONE
    c.cli("cluster", "stop", f"broker-{broker}")
    segment = Path(c.state.process(f"broker-{broker}").data_dir) / "data" / "d-0"
    liar, after = bytearray(hb.batch(hb.records(2), record_count=1)), bytearray(hb.good(1))
    liar[:8], after[:8] = (3).to_bytes(8, "big"), (4).to_bytes(8, "big")  # outside the CRC
    with (segment / "00000000000000000000.log").open("ab") as f:
        f.write(bytes(liar) + bytes(after))
    c.cli("cluster", "start", f"broker-{broker}")

    read = c.cli("consume", "d", "--from-beginning", "--timeout-ms", "10000", check=False)
    assert read.stdout.split() == ["a", "b", "c"]
    assert read.returncode != 0
    assert "CORRUPT_MESSAGE" in read.stderr and "offset 3" in read.stderr, read.stderr
    assert len(read.stderr.strip().splitlines()) == 1, "one line, not a stack trace"
