"""The v2 RecordBatch codec: byte layout, varints, the leader's validate-and-stamp, log recovery.

Positions and the CRC are checked against the spec (and the `crc32c` package) directly, not
through the codec's own reader, so a mistake shared by writer and reader still fails here.
"""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core.batch_validation import (
    StampedBatches,
    validate_and_stamp,
    validate_from_leader,
)
from minibroker.core.batch_validation import stamp as stamp_batches
from minibroker.core.errors import ErrorCode
from minibroker.core.records import (
    HEADER_SIZE,
    BatchHeader,
    NewRecord,
    Record,
    RecordError,
    _read_varint,
    _varint,
    _write_varint,
    build_batch,
    decode_batch,
    decode_records,
    iter_batches,
    valid_prefix,
)

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
BIG = 1 << 20  # a max_batch_bytes no test batch reaches

Headers = tuple[tuple[str, bytes | None], ...]


def three_records() -> list[NewRecord]:
    return [
        NewRecord(b"k0", b"v0"),
        NewRecord(None, b"v1", headers=(("h", b"x"),), timestamp=1_005),
        NewRecord(b"k2", None, timestamp=1_003),
    ]


def int_at(fmt: str, buf: bytes, pos: int) -> int:
    value: int = struct.unpack_from(fmt, buf, pos)[0]
    return value


def with_field(batch: bytes, fmt: str, pos: int, value: int) -> bytes:
    """`batch` with one header field replaced and the CRC recomputed, so only the edited rule
    can fire."""
    out = bytearray(batch)
    struct.pack_into(fmt, out, pos, value)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


def flip(data: bytes, pos: int) -> bytes:
    out = bytearray(data)
    out[pos] ^= 0xFF
    return bytes(out)


def code_of(exc: pytest.ExceptionInfo[RecordError]) -> ErrorCode:
    return exc.value.code


# ---- layout ------------------------------------------------------------------------------------


def test_header_is_61_bytes_and_an_empty_record_adds_seven() -> None:
    assert HEADER_SIZE == 61
    batch = build_batch([NewRecord(None, None)], base_timestamp=0)
    # length varint 1 + attributes 1 + timestamp delta 1 + offset delta 1 + key -1 (1)
    # + value -1 (1) + header count 1
    assert len(batch) == 61 + 7
    assert batch[61:] == bytes([6 << 1, 0, 0, 0, 0x01, 0x01, 0])


def test_header_fields_sit_at_kafkas_byte_positions() -> None:
    batch = build_batch(
        three_records(),
        base_timestamp=1_000,
        base_offset=100,
        partition_leader_epoch=5,
        producer_id=7,
        producer_epoch=3,
        base_sequence=11,
    )
    assert int_at(">q", batch, 0) == 100
    assert int_at(">i", batch, 8) == len(batch) - 12  # counts the bytes after itself
    assert int_at(">i", batch, 12) == 5
    assert batch[16] == 2
    assert int_at(">h", batch, 21) == 0  # attributes: uncompressed, create time, no flags
    assert int_at(">i", batch, 23) == 2
    assert int_at(">q", batch, 27) == 1_000
    assert int_at(">q", batch, 35) == 1_005
    assert int_at(">q", batch, 43) == 7
    assert int_at(">h", batch, 51) == 3
    assert int_at(">i", batch, 53) == 11
    assert int_at(">i", batch, 57) == 3


def test_crc_at_17_is_crc32c_of_bytes_21_to_the_end() -> None:
    batch = build_batch(three_records(), base_timestamp=1_000)
    assert int_at(">I", batch, 17) == crc32c(batch[21:])


def test_producer_fields_and_leader_epoch_default_to_minus_one() -> None:
    batch = build_batch([NewRecord(b"k", b"v")], base_timestamp=0)
    assert int_at(">i", batch, 12) == -1
    assert int_at(">q", batch, 43) == -1
    assert int_at(">h", batch, 51) == -1
    assert int_at(">i", batch, 53) == -1
    assert int_at(">q", batch, 0) == 0


def test_record_count_and_last_offset_delta_follow_the_number_of_records() -> None:
    for n in (1, 2, 10, 200):
        batch = build_batch([NewRecord(None, b"v")] * n, base_timestamp=0)
        assert int_at(">i", batch, 57) == n
        assert int_at(">i", batch, 23) == n - 1


def test_a_record_without_a_timestamp_takes_the_base_timestamp() -> None:
    batch = build_batch([NewRecord(b"a", b"1"), NewRecord(b"b", b"2")], base_timestamp=42)
    assert [r.timestamp for r in decode_records(batch)] == [42, 42]
    assert int_at(">q", batch, 35) == 42


def test_max_timestamp_is_the_largest_record_timestamp() -> None:
    batch = build_batch(three_records(), base_timestamp=1_000)
    assert [r.timestamp for r in decode_records(batch)] == [1_000, 1_005, 1_003]
    assert int_at(">q", batch, 27) == 1_000
    assert int_at(">q", batch, 35) == 1_005


def test_max_timestamp_is_a_record_timestamp_even_when_all_are_below_the_base() -> None:
    # Kafka's MaxTimestamp is the largest timestamp of the records in the batch; a base
    # timestamp no record carries must not leak into it.
    records = [NewRecord(b"a", b"1", timestamp=900), NewRecord(b"b", b"2", timestamp=950)]
    batch = build_batch(records, base_timestamp=1_000)
    assert [r.timestamp for r in decode_records(batch)] == [900, 950]
    assert int_at(">q", batch, 35) == 950


def test_building_an_empty_batch_is_refused() -> None:
    with pytest.raises(ValueError):
        build_batch([], base_timestamp=0)


def test_the_header_reader_agrees_with_the_byte_positions() -> None:
    batch = build_batch(three_records(), base_timestamp=1_000, base_offset=100)
    (h,) = iter_batches(batch, verify_crc=True)
    assert h == BatchHeader(
        position=0,
        base_offset=100,
        batch_length=len(batch) - 12,
        partition_leader_epoch=-1,
        magic=2,
        crc=crc32c(batch[21:]),
        attributes=0,
        last_offset_delta=2,
        base_timestamp=1_000,
        max_timestamp=1_005,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        record_count=3,
    )
    assert (h.size, h.last_offset, h.next_offset, h.compression) == (len(batch), 102, 103, 0)


# ---- varints and record fields -----------------------------------------------------------------

EDGE_VALUES = [0, -1, 1, 63, -64, 64, 2**31 - 1, -(2**31), INT64_MAX, INT64_MIN]


@pytest.mark.parametrize(
    ("value", "encoded"),
    [
        (0, "00"),
        (-1, "01"),
        (1, "02"),
        (63, "7e"),
        (-64, "7f"),
        (64, "8001"),
        (-65, "8101"),
        (2**31 - 1, "feffffff0f"),
        (-(2**31), "ffffffff0f"),
        (INT64_MAX, "feffffffffffffffff01"),
        (INT64_MIN, "ffffffffffffffffff01"),
    ],
)
def test_varints_are_zigzag_encoded_as_in_kafkas_byte_utils(value: int, encoded: str) -> None:
    out = bytearray()
    _write_varint(out, value)
    assert out.hex() == encoded
    assert _read_varint(bytes(out), 0) == (value, len(out))


@pytest.mark.parametrize("value", [0, 1, 63, 64, 8191, 8192, 16383, 16384, -1, -65, 2**40])
def test_the_varint_table_encodes_as_the_byte_by_byte_writer(value: int) -> None:
    out = bytearray()
    _write_varint(out, value)
    assert _varint(value) == bytes(out)


@pytest.mark.parametrize("delta", EDGE_VALUES)
def test_timestamp_deltas_round_trip_at_the_varint_edges(delta: int) -> None:
    records = [NewRecord(b"first", b"v"), NewRecord(b"edge", b"v", timestamp=delta)]
    decoded = decode_records(build_batch(records, base_timestamp=0))
    assert [r.timestamp for r in decoded] == [0, delta]


def test_a_varint_cut_short_is_corrupt() -> None:
    with pytest.raises(RecordError) as exc:
        _read_varint(b"\x80\x80", 0)
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


def test_a_varint_longer_than_ten_bytes_is_corrupt() -> None:
    with pytest.raises(RecordError) as exc:
        _read_varint(b"\xff" * 11, 0)
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    ("key", "value"),
    [(None, None), (b"", b""), (None, b""), (b"", None), (b"k", b"v"), (b"\x00" * 300, b"x")],
)
def test_null_and_empty_keys_and_values_stay_distinct(
    key: bytes | None, value: bytes | None
) -> None:
    (rec,) = decode_records(build_batch([NewRecord(key, value)], base_timestamp=7))
    assert (rec.key, rec.value) == (key, value)


def test_a_null_key_is_written_as_length_minus_one() -> None:
    batch = build_batch([NewRecord(None, b"")], base_timestamp=0)
    # length, attributes, timestamp delta, offset delta, then the key: varint -1 is 0x01
    assert batch[61 + 4] == 0x01
    assert batch[61 + 5] == 0x00  # the empty value has length 0


def test_headers_keep_order_null_values_and_unicode_keys() -> None:
    headers: Headers = (("trace-id", b"abc"), ("empty", b""), ("none", None), ("ключ-🔑", b"\xff"))
    (rec,) = decode_records(build_batch([NewRecord(b"k", b"v", headers)], base_timestamp=0))
    assert rec.headers == headers


def test_decoded_records_carry_offsets_from_the_base_offset() -> None:
    batch = build_batch(three_records(), base_timestamp=1_000, base_offset=40)
    assert decode_records(batch) == [
        Record(40, 1_000, b"k0", b"v0"),
        Record(41, 1_005, None, b"v1", (("h", b"x"),)),
        Record(42, 1_003, b"k2", None),
    ]


def test_decoding_a_batch_with_an_unknown_codec_is_corrupt() -> None:
    batch = with_field(build_batch([NewRecord(b"k", b"v")], base_timestamp=0), ">h", 21, 6)
    (h,) = iter_batches(batch, verify_crc=True)
    assert h.compression == 6
    with pytest.raises(RecordError) as exc:
        decode_batch(batch, h)
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


def test_a_record_length_that_disagrees_with_its_fields_is_corrupt() -> None:
    batch = bytearray(build_batch([NewRecord(b"k", b"v")], base_timestamp=0))
    batch[61] += 2  # claim one more byte (zigzag) than the record's fields use
    batch += b"\x00"
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))
    with pytest.raises(RecordError) as exc:
        decode_records(bytes(batch))
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


# ---- validate_and_stamp (the leader's append) --------------------------------------------------


def stamp_all(data: bytes, *, next_offset: int, epoch: int) -> StampedBatches:
    """Several batches stamped in a row (as a follower's validation would pass them)."""
    headers = validate_from_leader(data, max_batch_bytes=BIG)
    return stamp_batches(data, headers, next_offset=next_offset, epoch=epoch)


def three_batches() -> list[bytes]:
    return [
        build_batch([NewRecord(b"a", b"1"), NewRecord(b"b", b"2")], base_timestamp=10),
        build_batch([NewRecord(None, b"3")], base_timestamp=20),
        build_batch([NewRecord(b"c", None)] * 4, base_timestamp=30),
    ]


def test_stamping_gives_concatenated_batches_consecutive_offsets_from_next_offset() -> None:
    data = b"".join(three_batches())
    stamped = stamp_all(data, next_offset=500, epoch=3)
    assert [(h.base_offset, h.last_offset) for h in stamped.batches] == [
        (500, 501),
        (502, 502),
        (503, 506),
    ]
    assert (stamped.first_offset, stamped.last_offset) == (500, 506)
    assert [r.offset for r in decode_records(stamped.data)] == list(range(500, 507))
    assert [int_at(">q", stamped.data, h.position) for h in stamped.batches] == [500, 502, 503]


def test_stamping_writes_the_leader_epoch_into_every_batch() -> None:
    data = b"".join(three_batches())
    stamped = stamp_all(data, next_offset=0, epoch=9)
    assert [h.partition_leader_epoch for h in stamped.batches] == [9, 9, 9]
    assert [int_at(">i", stamped.data, h.position + 12) for h in stamped.batches] == [9, 9, 9]


def test_stamping_changes_only_base_offset_and_leader_epoch_and_the_crc_stays_valid() -> None:
    batches = three_batches()
    data = b"".join(batches)
    stamped = stamp_all(data, next_offset=2**40 + 3, epoch=2**31 - 1)
    assert len(stamped.data) == len(data)
    stamped_ranges = set()
    for h in stamped.batches:
        stamped_ranges |= set(range(h.position, h.position + 8))
        stamped_ranges |= set(range(h.position + 12, h.position + 16))
    changed = {i for i, (a, b) in enumerate(zip(data, stamped.data, strict=True)) if a != b}
    assert changed and changed <= stamped_ranges
    for h in stamped.batches:
        whole = stamped.data[h.position : h.position + h.size]
        assert int_at(">I", whole, 17) == crc32c(whole[21:])
    assert list(iter_batches(stamped.data, verify_crc=True)) == list(stamped.batches)


def test_a_followers_validation_returns_the_headers_of_every_batch() -> None:
    batches = three_batches()
    headers = validate_from_leader(b"".join(batches), max_batch_bytes=BIG)
    assert [h.position for h in headers] == [0, len(batches[0]), len(batches[0]) + len(batches[1])]
    assert [h.record_count for h in headers] == [2, 1, 4]


def stamp(data: bytes, *, max_batch_bytes: int = BIG) -> None:
    validate_and_stamp(
        data, next_offset=0, partition_leader_epoch=0, max_batch_bytes=max_batch_bytes
    )


def test_empty_data_is_corrupt() -> None:
    with pytest.raises(RecordError) as exc:
        stamp(b"")
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("cut", [1, 10, 30, 60, 61])
def test_a_truncated_batch_is_corrupt(cut: int) -> None:
    batches = three_batches()
    with pytest.raises(RecordError) as exc:
        stamp(b"".join(batches)[:-cut])
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE
    with pytest.raises(RecordError) as exc:
        stamp(batches[0][: max(len(batches[0]) - cut, 1)])
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("where", ["crc", "attributes", "last_delta", "count", "record", "last"])
def test_a_flipped_byte_in_the_crc_range_is_corrupt(where: str) -> None:
    batch = three_batches()[2]
    pos = {
        "crc": 18,
        "attributes": 22,
        "last_delta": 26,
        "count": 60,
        "record": 63,
        "last": len(batch) - 1,
    }[where]
    with pytest.raises(RecordError) as exc:
        stamp(flip(batch, pos))
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("pos", [0, 7, 12, 15])
def test_a_changed_byte_outside_the_crc_range_is_accepted(pos: int) -> None:
    # base offset and leader epoch are the producer's placeholders; the leader overwrites them.
    stamp(flip(three_batches()[0], pos))


def test_a_batch_length_pointing_past_the_data_is_corrupt() -> None:
    batch = three_batches()[0]
    with pytest.raises(RecordError) as exc:
        stamp(flip(batch, 8))  # batchLength becomes negative
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE
    longer = bytearray(batch)
    struct.pack_into(">i", longer, 8, len(batch))
    with pytest.raises(RecordError) as exc:
        stamp(bytes(longer))
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize(
    ("magic", "code"),
    [
        (0, ErrorCode.UNSUPPORTED_VERSION),
        (1, ErrorCode.UNSUPPORTED_VERSION),
        (3, ErrorCode.CORRUPT_MESSAGE),
        (-1, ErrorCode.CORRUPT_MESSAGE),
    ],
)
def test_a_batch_with_another_magic_is_refused(magic: int, code: ErrorCode) -> None:
    batch = bytearray(three_batches()[0])
    struct.pack_into(">b", batch, 16, magic)
    with pytest.raises(RecordError) as exc:
        stamp(bytes(batch))
    assert code_of(exc) == code


def test_a_batch_larger_than_max_batch_bytes_is_too_large() -> None:
    batch = three_batches()[2]
    stamp(batch, max_batch_bytes=len(batch))
    with pytest.raises(RecordError) as exc:
        stamp(batch, max_batch_bytes=len(batch) - 1)
    assert code_of(exc) == ErrorCode.MESSAGE_TOO_LARGE


def test_the_size_limit_applies_per_batch_not_per_request() -> None:
    batches = three_batches()
    validate_from_leader(b"".join(batches), max_batch_bytes=max(len(b) for b in batches))


@pytest.mark.parametrize("count", [5, 3, 0, -1])
def test_a_record_count_that_disagrees_with_the_last_offset_delta_is_invalid(count: int) -> None:
    batch = three_batches()[2]  # four records, last offset delta 3
    edited = with_field(batch, ">i", 57, count)
    assert list(iter_batches(edited, verify_crc=True))  # framing and CRC still fine
    with pytest.raises(RecordError) as exc:
        stamp(edited)
    assert code_of(exc) == ErrorCode.INVALID_RECORD


def test_a_negative_last_offset_delta_is_invalid() -> None:
    edited = with_field(build_batch([NewRecord(b"k", b"v")], base_timestamp=0), ">i", 23, -1)
    with pytest.raises(RecordError) as exc:
        stamp(edited)
    assert code_of(exc) == ErrorCode.INVALID_RECORD


def test_one_bad_batch_rejects_the_whole_request() -> None:
    batches = three_batches()
    with pytest.raises(RecordError):
        stamp(batches[0] + flip(batches[1], 65) + batches[2])


# ---- valid_prefix (log recovery) ---------------------------------------------------------------


def test_a_torn_tail_leaves_the_whole_batches_before_it() -> None:
    batches = three_batches()
    data = b"".join(batches)
    whole = len(batches[0]) + len(batches[1])
    for cut in (whole + 1, whole + 30, whole + 61, len(data) - 1):
        length, headers = valid_prefix(data[:cut])
        assert length == whole
        assert [h.position for h in headers] == [0, len(batches[0])]


def test_whole_batches_are_all_valid() -> None:
    data = b"".join(three_batches())
    length, headers = valid_prefix(data)
    assert (length, len(headers)) == (len(data), 3)


def test_a_corrupt_byte_in_the_second_of_three_batches_keeps_only_the_first() -> None:
    batches = three_batches()
    data = batches[0] + flip(batches[1], 65) + batches[2]
    length, headers = valid_prefix(data)
    assert length == len(batches[0])
    assert [h.base_timestamp for h in headers] == [10]


@pytest.mark.parametrize(
    "garbage", [b"", b"\x00", b"\xff" * 100, b"\x00" * 200, b"not a batch" * 9]
)
def test_garbage_only_is_an_empty_prefix(garbage: bytes) -> None:
    assert valid_prefix(garbage) == (0, [])


def test_a_batch_with_a_negative_count_ends_the_valid_prefix() -> None:
    batches = three_batches()
    data = batches[0] + with_field(batches[1], ">i", 57, -1) + batches[2]
    assert valid_prefix(data)[0] == len(batches[0])


# ---- iter_batches reads headers only ------------------------------------------------------------


def garbage_records_batch() -> bytes:
    """A batch whose framing and CRC are right but whose records region is nonsense."""
    out = bytearray(build_batch([NewRecord(b"key", b"value" * 4)] * 3, base_timestamp=5))
    out[HEADER_SIZE:] = b"\xff" * (len(out) - HEADER_SIZE)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[21:])))
    return bytes(out)


@pytest.mark.parametrize("verify_crc", [False, True])
def test_iter_batches_does_not_decode_records(verify_crc: bool) -> None:
    batch = garbage_records_batch()
    (h,) = iter_batches(batch, verify_crc=verify_crc)
    assert (h.record_count, h.size, h.base_timestamp) == (3, len(batch), 5)
    with pytest.raises(RecordError) as exc:
        decode_records(batch)
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE
    # ...but the leader walks them before appending (issue 15: a valid CRC is not a valid batch).
    with pytest.raises(RecordError) as exc:
        validate_and_stamp(batch, next_offset=7, partition_leader_epoch=1, max_batch_bytes=BIG)
    assert code_of(exc) == ErrorCode.INVALID_RECORD


def test_iter_batches_checks_the_crc_only_when_asked() -> None:
    batch = flip(three_batches()[0], 70)
    assert len(list(iter_batches(batch))) == 1
    with pytest.raises(RecordError) as exc:
        list(iter_batches(batch, verify_crc=True))
    assert code_of(exc) == ErrorCode.CORRUPT_MESSAGE


def test_iter_batches_reports_positions_within_the_buffer() -> None:
    batches = three_batches()
    positions = [h.position for h in iter_batches(memoryview(b"".join(batches)))]
    assert positions == [0, len(batches[0]), len(batches[0]) + len(batches[1])]


# ---- properties --------------------------------------------------------------------------------

header_keys = st.text(st.characters(codec="utf-8"), max_size=8)
maybe_bytes = st.none() | st.binary(max_size=40)
new_records = st.lists(
    st.builds(
        NewRecord,
        key=maybe_bytes,
        value=maybe_bytes,
        headers=st.lists(st.tuples(header_keys, maybe_bytes), max_size=3).map(tuple),
        timestamp=st.none() | st.integers(0, 2**41),
    ),
    min_size=1,
    max_size=12,
)
base_timestamps = st.integers(0, 2**41)


@given(records=new_records, base_timestamp=base_timestamps, base_offset=st.integers(0, 2**62))
def test_decode_returns_what_was_built(
    records: list[NewRecord], base_timestamp: int, base_offset: int
) -> None:
    batch = build_batch(records, base_timestamp=base_timestamp, base_offset=base_offset)
    timestamps = [base_timestamp if r.timestamp is None else r.timestamp for r in records]
    assert decode_records(batch) == [
        Record(base_offset + i, ts, r.key, r.value, r.headers)
        for i, (r, ts) in enumerate(zip(records, timestamps, strict=True))
    ]
    (h,) = iter_batches(batch, verify_crc=True)
    assert (h.record_count, h.last_offset_delta) == (len(records), len(records) - 1)
    assert h.max_timestamp == max(timestamps)


@given(
    batches=st.lists(st.tuples(new_records, base_timestamps), min_size=1, max_size=4),
    next_offset=st.integers(0, 2**62),
    epoch=st.integers(0, 2**31 - 1),
)
def test_stamping_keeps_records_decodable_and_crcs_valid(
    batches: list[tuple[list[NewRecord], int]], next_offset: int, epoch: int
) -> None:
    data = b"".join(build_batch(recs, base_timestamp=ts) for recs, ts in batches)
    before = decode_records(data)
    stamped = stamp_all(data, next_offset=next_offset, epoch=epoch)
    after = decode_records(stamped.data)
    assert [r.offset for r in after] == list(range(next_offset, next_offset + len(before)))
    assert [(r.timestamp, r.key, r.value, r.headers) for r in after] == [
        (r.timestamp, r.key, r.value, r.headers) for r in before
    ]
    headers = list(iter_batches(stamped.data, verify_crc=True))
    assert all(h.partition_leader_epoch == epoch for h in headers)
    assert valid_prefix(stamped.data)[0] == len(data)


def test_decoding_refuses_a_null_header_key_and_trailing_bytes() -> None:
    def recrc(buf: bytearray) -> bytes:
        struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
        return bytes(buf)

    good = build_batch([NewRecord(b"k", b"v", (("h", b"1"),))], base_timestamp=0)
    # The header key "h" is written as varint 2 (zigzag of length 1) then b"h": make it null.
    i = good.index(b"\x02h")
    null_key = bytearray(good[:i] + b"\x01" + good[i + 2 :])
    struct.pack_into(">i", null_key, 8, len(null_key) - 12)
    null_key[HEADER_SIZE] -= 2  # the record's length varint: 2 bytes shorter (zigzag)
    with pytest.raises(RecordError, match="header key length is negative"):
        decode_records(recrc(null_key))
    trailing = bytearray(good + b"\x00")
    struct.pack_into(">i", trailing, 8, len(trailing) - 12)
    data = recrc(trailing)
    assert list(iter_batches(data, verify_crc=True))
    with pytest.raises(RecordError, match="bytes follow the last record"):
        decode_records(data)
