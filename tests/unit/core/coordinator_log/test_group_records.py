"""`__consumer_offsets` records in Kafka 2.6's byte formats (GroupMetadataManager): the bytes
2.6 writes, every older value version 2.6 reads, tombstones, and refusal of what is not a
record (GroupMetadataManagerTest: testReadFromOldGroupMetadata, testReadOffsetMessageValue...)."""

from __future__ import annotations

import struct

import pytest

from minibroker.core.coordinator_log.group_records import (
    GroupKey,
    GroupValue,
    MemberValue,
    OffsetKey,
    OffsetValue,
    group_key,
    group_value,
    offset_key,
    offset_value,
    read_group_value,
    read_key,
    read_offset_value,
)
from minibroker.core.coordinator_log.partitioning import partition_for
from minibroker.core.coordinator_log.schema import RecordFormatError


def s(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def test_keys_are_kafkas_bytes() -> None:
    assert offset_key(OffsetKey("g", "t", 7)) == b"\x00\x01" + s("g") + s("t") + b"\x00\x00\x00\x07"
    assert group_key(GroupKey("grp")) == b"\x00\x02" + s("grp")
    assert read_key(offset_key(OffsetKey("g", "t", 7))) == OffsetKey("g", "t", 7)
    assert read_key(b"\x00\x00" + s("g") + s("t") + b"\x00\x00\x00\x01") == OffsetKey("g", "t", 1)
    assert read_key(group_key(GroupKey("grp"))) == GroupKey("grp")


def test_an_offset_value_is_written_as_v3_and_every_version_is_read() -> None:
    v = OffsetValue(42, "meta", 1000, leader_epoch=5)
    data = offset_value(v)
    assert data == b"\x00\x03" + struct.pack(">qi", 42, 5) + s("meta") + struct.pack(">q", 1000)
    assert read_offset_value(data) == v
    v0 = b"\x00\x00" + struct.pack(">q", 9) + s("") + struct.pack(">q", 77)
    assert read_offset_value(v0) == OffsetValue(9, "", 77)
    v1 = b"\x00\x01" + struct.pack(">q", 9) + s("m") + struct.pack(">qq", 77, 500)
    assert read_offset_value(v1) == OffsetValue(9, "m", 77, expire_timestamp=500)
    v1_default = b"\x00\x01" + struct.pack(">q", 9) + s("m") + struct.pack(">qq", 77, -1)
    assert read_offset_value(v1_default) == OffsetValue(9, "m", 77)
    v2 = b"\x00\x02" + struct.pack(">q", 9) + s("m") + struct.pack(">q", 77)
    assert read_offset_value(v2) == OffsetValue(9, "m", 77)
    no_epoch = OffsetValue(1, "", 2)
    assert read_offset_value(offset_value(no_epoch)) == no_epoch


def test_an_expire_timestamp_is_kept_in_a_v1_value_as_2_6_writes_it() -> None:
    v = OffsetValue(3, "x", 10, expire_timestamp=99)
    assert offset_value(v)[:2] == b"\x00\x01"
    assert read_offset_value(offset_value(v)) == v


def test_group_values_round_trip_and_older_versions_are_read() -> None:
    member = MemberValue("m-1", "client", "/127.0.0.1", 30000, 10000, b"sub", b"assign", "i-1")
    v = GroupValue("consumer", 4, "range", "m-1", 123456, (member,))
    data = group_value(v)
    assert data[:2] == b"\x00\x03"
    assert read_group_value(data) == v
    empty = GroupValue("consumer", 5, None, None, None)
    assert read_group_value(group_value(empty)) == empty
    v0 = (
        b"\x00\x00" + s("consumer") + struct.pack(">i", 2) + s("range") + s("m")
        + struct.pack(">i", 1) + s("m") + s("c") + s("h") + struct.pack(">i", 6000)
        + struct.pack(">i", 3) + b"sub" + struct.pack(">i", 1) + b"a"
    )  # fmt: skip
    got = read_group_value(v0)
    assert got is not None and got.current_state_timestamp is None
    assert got.members == (MemberValue("m", "c", "h", 6000, 6000, b"sub", b"a"),)


def test_tombstones_are_none() -> None:
    assert read_offset_value(None) is None
    assert read_group_value(None) is None


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        b"\x00\x09" + s("g"),
        b"\x00\x01" + s("g"),
        b"\x00\x01\x7f\xff",
        b"\x00\x02\xff\xfe",
    ],
)
def test_what_is_not_a_key_is_refused(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        read_key(data)


@pytest.mark.parametrize(
    "data",
    [b"\x00\x07", b"\x00\x03\x00", b"\x00\x03" + b"\x00" * 8 + b"\x00\x00\x00\x00\x00\x05"],
)
def test_what_is_not_an_offset_value_is_refused(data: bytes) -> None:
    with pytest.raises(RecordFormatError):
        read_offset_value(data)


def test_a_group_value_with_an_impossible_member_count_is_refused() -> None:
    data = b"\x00\x03" + s("consumer") + struct.pack(">i", 1) + b"\xff\xff\xff\xff"
    data += struct.pack(">q", -1) + struct.pack(">i", 1_000_000)
    with pytest.raises(RecordFormatError, match="ARRAY"):
        read_group_value(data)


def test_the_partition_of_a_group_is_kafkas() -> None:
    """abs(hashCode) % 50: "hello".hashCode() is 99162322 (Java); Integer.MIN_VALUE -> 0."""
    assert partition_for("hello", 50) == 99162322 % 50
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("", 50) == 0
