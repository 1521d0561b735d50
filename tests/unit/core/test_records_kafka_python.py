"""Our v2 batches against kafka-python's, an independent implementation, in both directions.

kafka-python's builder writes what a real producer sends (base offset 0, leader epoch 0), and
its reader checks the CRC and the record framing on its own, so agreement here means our bytes
are Kafka's bytes rather than merely self-consistent.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core.batch_validation import validate_and_stamp
from minibroker.core.records import (
    TRANSACTIONAL_FLAG,
    NewRecord,
    Record,
    build_batch,
    decode_batch,
    decode_records,
    iter_batches,
)

with warnings.catch_warnings():
    # kafka-python 3 reads its protocol schemas with importlib.resources' deprecated
    # read_text/open_text when the package is imported; the warnings are not ours to fix.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

Headers = tuple[tuple[str, bytes | None], ...]
BIG = 1 << 20


@dataclass(frozen=True)
class TheirBatch:
    """What kafka-python reads from one batch, in our vocabulary."""

    crc_valid: bool
    magic: int
    base_offset: int
    leader_epoch: int
    last_offset_delta: int
    record_count: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records: tuple[Record, ...]


def read_with_kafka_python(data: bytes) -> list[TheirBatch]:
    out = []
    batches = MemoryRecords(data)
    for batch in batches:
        assert isinstance(batch, DefaultRecordBatch)
        crc_valid = batch.validate_crc()  # must come before iterating the records
        records = tuple(
            Record(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch
        )
        out.append(
            TheirBatch(
                crc_valid=crc_valid,
                magic=batch.magic,
                base_offset=batch.base_offset,
                leader_epoch=batch.leader_epoch,
                last_offset_delta=batch.last_offset_delta,
                record_count=batch.records_count,
                first_timestamp=batch.first_timestamp,
                max_timestamp=batch.max_timestamp,
                producer_id=batch.producer_id,
                producer_epoch=batch.producer_epoch,
                base_sequence=batch.base_sequence,
                records=records,
            )
        )
    assert batches.valid_bytes() == len(data)  # no bytes left over as a torn tail
    return out


def build_with_kafka_python(
    records: Sequence[tuple[int, bytes | None, bytes | None, Headers]],
    *,
    compression_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: int = 0,
) -> bytes:
    """One batch of (timestamp, key, value, headers) at offset deltas 0..n-1."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=compression_type,
        is_transactional=is_transactional,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        batch_size=BIG,
    )
    for delta, (timestamp, key, value, headers) in enumerate(records):
        assert builder.append(delta, timestamp, key, value, list(headers)) is not None
    return bytes(builder.build())


MIXED: list[tuple[int, bytes | None, bytes | None, Headers]] = [
    (1_700_000_000_000, b"key-0", b"value-0", ()),
    (1_700_000_000_005, None, b"value-1", (("trace", b"t1"), ("none", None))),
    (1_699_999_999_990, b"", None, (("ключ-🔑", b""),)),
    (1_700_000_000_001, None, None, ()),
]


def our_records(
    records: list[tuple[int, bytes | None, bytes | None, Headers]],
) -> list[NewRecord]:
    return [NewRecord(k, v, h, ts) for ts, k, v, h in records]


def expected(
    records: list[tuple[int, bytes | None, bytes | None, Headers]], base_offset: int
) -> tuple[Record, ...]:
    return tuple(Record(base_offset + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records))


# ---- ours -> theirs ----------------------------------------------------------------------------


def test_kafka_python_reads_our_batch_with_a_valid_crc() -> None:
    batch = build_batch(
        our_records(MIXED),
        base_timestamp=MIXED[0][0],
        base_offset=0,
        producer_id=4_000,
        producer_epoch=2,
        base_sequence=17,
    )
    (theirs,) = read_with_kafka_python(batch)
    assert theirs == TheirBatch(
        crc_valid=True,
        magic=2,
        base_offset=0,
        leader_epoch=-1,
        last_offset_delta=3,
        record_count=4,
        first_timestamp=1_700_000_000_000,
        max_timestamp=1_700_000_000_005,
        producer_id=4_000,
        producer_epoch=2,
        base_sequence=17,
        records=expected(MIXED, 0),
    )


def test_kafka_python_reads_our_batches_after_the_leader_stamps_them() -> None:
    first = build_batch(our_records(MIXED), base_timestamp=MIXED[0][0])
    second = build_batch([NewRecord(b"k", b"v")] * 3, base_timestamp=5)
    stamped_first = validate_and_stamp(
        first, next_offset=1_000, partition_leader_epoch=7, max_batch_bytes=BIG
    )
    stamped_second = validate_and_stamp(
        second, next_offset=1_004, partition_leader_epoch=7, max_batch_bytes=BIG
    )
    theirs = read_with_kafka_python(stamped_first.data + stamped_second.data)
    assert [(b.crc_valid, b.base_offset, b.leader_epoch) for b in theirs] == [
        (True, 1_000, 7),
        (True, 1_004, 7),
    ]
    assert theirs[0].records == expected(MIXED, 1_000)
    assert [r.offset for r in theirs[1].records] == [1_004, 1_005, 1_006]


@pytest.mark.parametrize("delta", [0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), 2**63 - 1, -(2**63)])
def test_kafka_python_decodes_our_timestamp_deltas_at_the_varint_edges(delta: int) -> None:
    records = [NewRecord(b"a", b"1"), NewRecord(b"b", b"2", timestamp=delta)]
    (theirs,) = read_with_kafka_python(build_batch(records, base_timestamp=0))
    assert theirs.crc_valid
    assert [r.timestamp for r in theirs.records] == [0, delta]


# ---- theirs -> ours ----------------------------------------------------------------------------


def test_we_read_a_kafka_python_batch_with_a_valid_crc() -> None:
    data = build_with_kafka_python(MIXED)
    (h,) = iter_batches(data, verify_crc=True)
    assert (h.magic, h.base_offset, h.partition_leader_epoch) == (2, 0, 0)
    assert (h.record_count, h.last_offset_delta, h.size) == (4, 3, len(data))
    assert (h.base_timestamp, h.max_timestamp) == (1_700_000_000_000, 1_700_000_000_005)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.attributes) == (-1, -1, -1, 0)
    assert tuple(decode_records(data)) == expected(MIXED, 0)


def test_we_build_the_same_bytes_as_kafka_python() -> None:
    ours = build_batch(our_records(MIXED), base_timestamp=MIXED[0][0], partition_leader_epoch=0)
    assert ours == build_with_kafka_python(MIXED)


def test_we_stamp_kafka_python_batches_and_kafka_python_still_reads_them() -> None:
    stamped = [
        validate_and_stamp(data, next_offset=offset, partition_leader_epoch=12, max_batch_bytes=BIG)
        for data, offset in [
            (build_with_kafka_python(MIXED), 2**40),
            (build_with_kafka_python(MIXED[:1]), 2**40 + 4),
        ]
    ]
    assert [(s.first_offset, s.last_offset) for s in stamped] == [
        (2**40, 2**40 + 3),
        (2**40 + 4, 2**40 + 4),
    ]
    theirs = read_with_kafka_python(b"".join(s.data for s in stamped))
    assert [(b.crc_valid, b.base_offset, b.leader_epoch) for b in theirs] == [
        (True, 2**40, 12),
        (True, 2**40 + 4, 12),
    ]
    assert theirs[0].records == expected(MIXED, 2**40)
    assert theirs[1].records == expected(MIXED[:1], 2**40 + 4)


def test_we_read_kafka_python_producer_state_and_transactional_flag() -> None:
    data = build_with_kafka_python(
        MIXED[:2], producer_id=9_001, producer_epoch=3, base_sequence=40, is_transactional=1
    )
    (h,) = iter_batches(data, verify_crc=True)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (9_001, 3, 40)
    assert h.attributes & TRANSACTIONAL_FLAG


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_a_compressed_kafka_python_batch_is_checked_stamped_and_decoded(codec: int) -> None:
    records: list[tuple[int, bytes | None, bytes | None, Headers]] = [
        (1_000 + i, b"k", b"the same value again " * 20, ()) for i in range(10)
    ]
    data = build_with_kafka_python(records, compression_type=codec)
    (h,) = iter_batches(data, verify_crc=True)
    assert (h.compression, h.record_count) == (codec, 10)
    assert tuple(decode_batch(data, h)) == expected(records, 0)
    stamped = validate_and_stamp(
        data, next_offset=50, partition_leader_epoch=2, max_batch_bytes=BIG
    )
    (theirs,) = read_with_kafka_python(stamped.data)
    assert (theirs.crc_valid, theirs.base_offset, theirs.leader_epoch) == (True, 50, 2)
    assert theirs.records == tuple(
        Record(50 + i, ts, k, v, h) for i, (ts, k, v, h) in enumerate(records)
    )
    assert tuple(decode_records(stamped.data)) == theirs.records


# ---- properties --------------------------------------------------------------------------------

maybe_bytes = st.none() | st.binary(max_size=40)
records_strategy = st.lists(
    st.tuples(
        st.integers(0, 2**41),
        maybe_bytes,
        maybe_bytes,
        st.lists(
            st.tuples(st.text(st.characters(codec="utf-8"), max_size=8), maybe_bytes), max_size=3
        ).map(tuple),
    ),
    min_size=1,
    max_size=10,
)


@given(records=records_strategy, next_offset=st.integers(0, 2**62), epoch=st.integers(0, 2**31 - 1))
def test_both_implementations_agree_on_arbitrary_records(
    records: list[tuple[int, bytes | None, bytes | None, Headers]], next_offset: int, epoch: int
) -> None:
    theirs_built = build_with_kafka_python(records)
    ours_built = build_batch(
        our_records(records), base_timestamp=records[0][0], partition_leader_epoch=0
    )
    assert ours_built == theirs_built
    assert tuple(decode_records(theirs_built)) == expected(records, 0)
    stamped = validate_and_stamp(
        theirs_built, next_offset=next_offset, partition_leader_epoch=epoch, max_batch_bytes=BIG
    )
    (theirs,) = read_with_kafka_python(stamped.data)
    assert (theirs.crc_valid, theirs.base_offset, theirs.leader_epoch) == (
        True,
        next_offset,
        epoch,
    )
    assert theirs.max_timestamp == max(ts for ts, _, _, _ in records)
    assert theirs.records == expected(records, next_offset)
