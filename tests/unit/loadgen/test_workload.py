"""The workload is a pure function of (spec, i): determinism, sizes, key distributions and
partition spread."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from loadgen.workload import (
    DRAW_BITS,
    MIN_RECORD_SIZE,
    WorkloadError,
    WorkloadSpec,
    key_index,
    parse_value,
    record,
    splitmix64,
    zipf_table,
)


def test_splitmix64_matches_the_reference_first_output() -> None:
    # The first output of Vigna's splitmix64.c seeded with 0 (state += golden gamma, then mix).
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4


def test_records_are_deterministic_and_depend_on_the_seed() -> None:
    spec = WorkloadSpec(records=100, seed=7)
    assert [record(spec, i) for i in range(100)] == [record(spec, i) for i in range(100)]
    other = WorkloadSpec(records=100, seed=8)
    assert [record(spec, i)[1] for i in range(100)] != [record(other, i)[1] for i in range(100)]


@pytest.mark.parametrize("size", [MIN_RECORD_SIZE, 33, 100, 1024, 4097])
def test_values_have_exactly_the_record_size(size: int) -> None:
    spec = WorkloadSpec(records=50, record_size=size, keys=1_000_000)
    assert {len(record(spec, i)[1]) for i in range(50)} == {size}


def test_every_value_is_distinct() -> None:
    spec = WorkloadSpec(records=5000, keys=3)
    assert len({record(spec, i)[1] for i in range(5000)}) == 5000


@given(
    i=st.integers(min_value=0, max_value=10**12 - 1),
    seed=st.integers(min_value=-(2**70), max_value=2**70),
    keys=st.integers(min_value=1, max_value=1_000_000),
    zipf=st.booleans(),
)
def test_the_value_carries_its_sequence_number_and_key(
    i: int, seed: int, keys: int, zipf: bool
) -> None:
    spec = WorkloadSpec(
        records=10**12, keys=keys, key_distribution="zipf" if zipf else "uniform", seed=seed
    )
    key, value, partition = record(spec, i)
    seq, index = parse_value(value)
    assert (seq, index) == (i, key_index(spec, i))
    assert key == b"k%06d" % index and 0 <= index < keys
    assert partition is None


def test_parse_value_refuses_foreign_bytes() -> None:
    for value in (b"hello", b"12|k1|x", b"00000000000x|k000001|pad"):
        with pytest.raises(WorkloadError):
            parse_value(value)


def test_uniform_keys_are_evenly_used() -> None:
    spec = WorkloadSpec(records=20_000, keys=10, seed=3)
    counts = Counter(key_index(spec, i) for i in range(20_000))
    assert set(counts) == set(range(10))
    assert all(1800 <= n <= 2200 for n in counts.values()), counts


def test_zipf_keys_are_skewed_by_rank() -> None:
    spec = WorkloadSpec(records=50_000, keys=100, key_distribution="zipf", seed=3)
    counts = Counter(key_index(spec, i) for i in range(50_000))
    harmonic = sum(1 / r for r in range(1, 101))
    # Rank r has probability 1/(r * H_100): key 0 about 19%, key 1 half of that.
    assert counts[0] / 50_000 == pytest.approx(1 / harmonic, rel=0.05)
    assert counts[0] / counts[1] == pytest.approx(2.0, rel=0.1)
    assert counts[0] > counts[9] > counts[99]
    top10 = sum(counts[k] for k in range(10))
    assert top10 / 50_000 > 0.5  # uniform would give 10%


def test_the_zipf_table_is_a_complete_inverse_cdf() -> None:
    table = zipf_table(1000)
    assert len(table) == 1000
    assert all(a <= b for a, b in zip(table, table[1:], strict=False))
    assert table[-1] == 1 << DRAW_BITS


def test_workload_partitions_follow_the_key_and_spread() -> None:
    spec = WorkloadSpec(records=30_000, keys=1000, partitions=3, seed=5)
    by_key: dict[bytes, set[int | None]] = {}
    per_partition: Counter[int | None] = Counter()
    for i in range(30_000):
        key, _, partition = record(spec, i)
        by_key.setdefault(key, set()).add(partition)
        per_partition[partition] += 1
    assert all(len(parts) == 1 for parts in by_key.values())  # a key stays in one partition
    assert set(per_partition) == {0, 1, 2}
    assert all(8_500 <= n <= 11_500 for n in per_partition.values()), per_partition


def test_zipf_hot_keys_do_not_all_share_partition_zero() -> None:
    spec = WorkloadSpec(records=1, keys=100, key_distribution="zipf", partitions=4, seed=1)
    hot = {record(spec, i)[2] for i in range(2000) if key_index(spec, i) < 8}
    assert len(hot) > 1


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"records": -1}, "records"),
        ({"records": 10, "record_size": 31}, "record size"),
        ({"records": 10, "keys": 0}, "keys"),
        ({"records": 10, "keys": 1_000_001}, "keys"),
        ({"records": 10, "key_distribution": "pareto"}, "key distribution"),
        ({"records": 10, "partitions": 0}, "partitions"),
    ],
)
def test_bad_specs_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(WorkloadError, match=message):
        WorkloadSpec(**fields)  # type: ignore[arg-type]
