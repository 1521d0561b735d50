"""murmur2 against Kafka's own test vectors and kafka-python; keyed and sticky partitioning."""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core.partitioner import (
    StickyPartition,
    murmur2,
    next_sticky_partition,
    partition_for,
    to_positive,
)

with warnings.catch_warnings():
    # kafka-python's package import uses deprecated importlib.resources calls; not ours to fix.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.partitioner.default import murmur2 as kafka_python_murmur2


# apache/kafka clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java testMurmur2
# (read at commit f55581dc73953c3509a4702433aeeeddc2970779).
@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafkas_utils_test(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


@given(st.binary(max_size=64))
def test_murmur2_agrees_with_kafka_python(data: bytes) -> None:
    # kafka-python returns the unsigned 32-bit value of the same hash.
    assert murmur2(data) & 0xFFFFFFFF == kafka_python_murmur2(data)
    assert -(2**31) <= murmur2(data) < 2**31


def test_to_positive_clears_the_sign_bit_rather_than_negating() -> None:
    assert to_positive(-(2**31)) == 0
    assert to_positive(-1) == 2**31 - 1
    assert to_positive(5) == 5


@pytest.mark.parametrize(("key", "n"), [(b"foobar", 3), (b"21", 12), (b"", 7)])
def test_keyed_records_go_to_murmur2_mod_partitions(key: bytes, n: int) -> None:
    sticky = StickyPartition()
    expected = (murmur2(key) & 0x7FFFFFFF) % n
    assert partition_for(key, n, sticky, available=[0]) == expected
    assert sticky.current is None  # keyed records never move the sticky partition


def test_keyless_records_stick_until_a_new_batch_then_move_on() -> None:
    sticky = StickyPartition(cursor=1)
    first = partition_for(None, 4, sticky)
    assert [partition_for(None, 4, sticky) for _ in range(5)] == [first] * 5
    second = next_sticky_partition(sticky, 4)
    assert second != first
    assert partition_for(None, 4, sticky) == second


def test_sticky_partition_prefers_partitions_with_a_leader() -> None:
    sticky = StickyPartition(cursor=0)
    seen = {next_sticky_partition(sticky, 6, available=[2, 5]) for _ in range(10)}
    assert seen == {2, 5}


def test_sticky_partition_never_repeats_when_there_is_a_choice() -> None:
    sticky = StickyPartition(cursor=3)
    picks = [next_sticky_partition(sticky, 3) for _ in range(30)]
    assert all(a != b for a, b in zip(picks, picks[1:], strict=False))
    assert set(picks) == {0, 1, 2}


def test_sticky_state_is_replayable_from_its_cursor() -> None:
    a, b = StickyPartition(cursor=11), StickyPartition(cursor=11)
    assert [next_sticky_partition(a, 5) for _ in range(8)] == [
        next_sticky_partition(b, 5) for _ in range(8)
    ]


def test_single_partition_and_shrunk_topic() -> None:
    sticky = StickyPartition()
    assert partition_for(None, 1, sticky) == 0
    assert next_sticky_partition(sticky, 1) == 0
    sticky = StickyPartition(current=7)
    assert 0 <= partition_for(None, 3, sticky) < 3
    with pytest.raises(ValueError):
        partition_for(b"k", 0, sticky)
