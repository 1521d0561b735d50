"""What the broker refuses before an append (issue 15: a valid CRC is not a valid batch), the
codecs, and the C record walk against its Python reference."""

from __future__ import annotations

import struct
import warnings

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core import compression, record_walk
from minibroker.core.batch_validation import (
    validate_and_stamp,
    validate_from_client,
    validate_from_leader,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.records import (
    HEADER_SIZE,
    NewRecord,
    RecordError,
    build_batch,
    decode_records,
    iter_batches,
)
from tests.hostile import batches as hb

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.memory_records import MemoryRecords

BIG = 1 << 24
ISSUE_REPRODUCTION = bytes.fromhex(
    "0000000000000000000000640000000002719f0a810000000000010000018bcfe568000000018bcfe56800ff"
    "ffffffffffffffffffffffffff00000002200000000114484f5354494c452d623000200000020114484f5354"
    "494c452d623100200000040114484f5354494c452d623200"
)


def code_of(data: bytes, *, leader: bool = True) -> ErrorCode:
    try:
        if leader:
            validate_and_stamp(data, next_offset=0, partition_leader_epoch=0, max_batch_bytes=BIG)
        else:
            validate_from_leader(data, max_batch_bytes=BIG)
    except RecordError as exc:
        return exc.code
    return ErrorCode.NONE


def test_the_issues_batch_is_refused_before_anything_is_stamped() -> None:
    (h,) = iter_batches(ISSUE_REPRODUCTION, verify_crc=True)  # its CRC is right
    assert (h.record_count, h.last_offset_delta) == (2, 1)
    with pytest.raises(RecordError, match="bytes follow the last record") as exc:
        validate_from_client(ISSUE_REPRODUCTION, max_batch_bytes=BIG)
    assert exc.value.code is ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("variant", hb.VARIANTS, ids=lambda v: v.name)
def test_every_hostile_variant_gets_its_kafka_error(variant: hb.Variant) -> None:
    assert code_of(variant.make()) is variant.code


CLIENT_ONLY = {
    "two-batches", "control-batch", "transactional", "log-append-time",
    "producer-id-negative-sequence", "producer-id-negative-epoch",
}  # fmt: skip


# Fewer records than offsets, in order: the shape of a batch a leader's log cleaner rewrote
# (Kafka's follower takes it; a client may not send it).
COMPACTED_SHAPES = {"delta-disagrees", "delta-int32-max"}


@pytest.mark.parametrize(
    "variant",
    [v for v in hb.VARIANTS if v.name not in CLIENT_ONLY | COMPACTED_SHAPES],
    ids=lambda v: v.name,
)
def test_a_follower_refuses_the_same_structural_lies(variant: hb.Variant) -> None:
    assert code_of(variant.make(), leader=False) is variant.code


@pytest.mark.parametrize("name", sorted(COMPACTED_SHAPES))
def test_a_follower_takes_a_compacted_batch_a_client_may_not_send(name: str) -> None:
    (variant,) = [v for v in hb.VARIANTS if v.name == name]
    assert code_of(variant.make()) is variant.code
    assert code_of(variant.make(), leader=False) is ErrorCode.NONE


def test_the_builders_good_batches_pass_both_ways_and_kafka_python_reads_them() -> None:
    for data in [hb.good(1), hb.good(7), *(hb.compressed(c, 5) for c in (1, 2, 3, 4))]:
        assert code_of(data) is ErrorCode.NONE
        assert code_of(data, leader=False) is ErrorCode.NONE
        values = [r.value for r in decode_records(data)]
        assert values == [b"value-%d" % i for i in range(len(values))]
        kp = MemoryRecords(data).next_batch()
        assert kp is not None
        assert [r.value for r in kp] == values


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_compressed_batches_round_trip_and_decompress_within_the_bound(codec: int) -> None:
    raw = b"".join(hb.record(i, value=b"x" * 1000) for i in range(50))
    packed = compression.compress(codec, raw)
    assert compression.decompress(codec, packed) == raw
    with pytest.raises(compression.CompressionError):
        compression.decompress(codec, packed, max_bytes=len(raw) - 1)
    with pytest.raises(compression.CompressionError):
        compression.decompress(codec, packed + b"\x00trailing")


def test_raw_snappy_without_xerial_framing_is_read_too() -> None:
    import cramjam

    raw = hb.records(4)
    data = hb.batch(bytes(cramjam.snappy.compress_raw(raw)), record_count=4, attributes=2)
    assert code_of(data) is ErrorCode.NONE
    assert len(decode_records(data)) == 4


def test_valid_batches_of_every_shape_pass_and_decode_at_their_offsets() -> None:
    shapes = [
        NewRecord(None, None),
        NewRecord(b"k", b"", (("h", None), ("", b"x"))),
        NewRecord(b"", b"v"),
    ]
    data = build_batch(shapes, base_timestamp=5)
    stamped = validate_and_stamp(
        data, next_offset=40, partition_leader_epoch=2, max_batch_bytes=BIG
    )
    assert [r.offset for r in decode_records(stamped.data)] == [40, 41, 42]


def test_a_consumer_reading_a_damaged_batch_gets_corrupt_message_not_garbage() -> None:
    with pytest.raises(RecordError) as exc:
        decode_records(ISSUE_REPRODUCTION)
    assert exc.value.code is ErrorCode.CORRUPT_MESSAGE


# ---- the C walk against the Python reference ---------------------------------------------------


def test_the_c_walk_is_built_and_used() -> None:
    assert record_walk.NATIVE, "minibroker.core._record_walk was not built (see pyproject.toml)"
    assert record_walk.check_records is not record_walk.check_records_py


def both(body: bytes, count: int) -> record_walk.Failure:
    native = record_walk.check_records(body, count)
    reference = record_walk.check_records_py(body, count)
    assert native == reference, (body.hex(), count)
    return native


@given(body=st.binary(max_size=200), count=st.integers(-2, 12))
def test_c_and_python_agree_on_random_bytes(body: bytes, count: int) -> None:
    both(body, count)


valid_bodies = st.lists(
    st.builds(
        lambda key, value, headers: (key, value, headers),
        st.none() | st.binary(max_size=20),
        st.none() | st.binary(max_size=20),
        st.lists(st.tuples(st.binary(max_size=5), st.none() | st.binary(max_size=5)), max_size=3),
    ),
    min_size=1,
    max_size=8,
)


@given(
    recs=valid_bodies,
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=3),
    cut=st.integers(0, 3),
    count_shift=st.integers(-1, 1),
)
def test_c_and_python_agree_on_mutated_valid_bodies(
    recs: list[tuple[bytes | None, bytes | None, list[tuple[bytes, bytes | None]]]],
    edits: list[tuple[int, int]],
    cut: int,
    count_shift: int,
) -> None:
    body = bytearray(
        b"".join(hb.record(i, key=k, value=v, headers=tuple(h)) for i, (k, v, h) in enumerate(recs))
    )
    if not edits and not cut and not count_shift:
        assert both(bytes(body), len(recs)) is None
    for pos, byte in edits:
        body[pos % len(body)] = byte
    both(bytes(body[: len(body) - cut]), len(recs) + count_shift)


maybe = st.none() | st.binary(max_size=30)


@given(
    recs=st.lists(
        st.builds(NewRecord, maybe, maybe, st.just(()), st.none()), min_size=1, max_size=10
    ),
    flips=st.lists(
        st.tuples(st.integers(HEADER_SIZE, 10_000), st.integers(1, 255)), min_size=1, max_size=2
    ),
)
def test_whatever_the_validator_accepts_decodes_to_its_record_count(
    recs: list[NewRecord], flips: list[tuple[int, int]]
) -> None:
    """Mutate a valid batch's records region, fix its CRC: either the validator refuses it, or
    the batch decodes to exactly its record count at consecutive offsets."""
    data = bytearray(build_batch(recs, base_timestamp=0))
    for pos, xor in flips:
        at = HEADER_SIZE + (pos - HEADER_SIZE) % (len(data) - HEADER_SIZE)
        data[at] ^= xor
    struct.pack_into(">I", data, 17, crc32c(bytes(data[21:])))
    if code_of(bytes(data)) is ErrorCode.NONE:
        decoded = decode_records(bytes(data))
        assert [r.offset for r in decoded] == list(range(len(recs)))
