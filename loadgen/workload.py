"""The load generator's workload: record i of a seeded run, computed from (spec, i) alone.

Pure (no I/O, clock or `random`): any Spark task can compute any record, a rerun with the same
seed produces the same bytes, and verification can parse a record's sequence number and key
back out of its value. Randomness comes from splitmix64, implemented here so that every Python
and every platform draws the same numbers.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from typing import Literal

KeyDistribution = Literal["uniform", "zipf"]
DISTRIBUTIONS: tuple[KeyDistribution, ...] = ("uniform", "zipf")

MASK64 = (1 << 64) - 1
# The zipf table maps a 53-bit draw to a key; 53 bits is what a float's mantissa holds, so the
# table can be built with floats without losing resolution.
DRAW_BITS = 53
# Zipf's exponent: s = 1 is the classic "rank r is drawn with weight 1/r".
ZIPF_EXPONENT = 1.0
MAX_KEYS = 1_000_000
MAX_RECORDS = 10**12  # the sequence number is written with 12 digits

# Value layout: b"<sequence number, 12 digits>|<key>|<padding>". The key is b"k<index, 6 digits>".
SEQUENCE_DIGITS = 12
HEADER_SIZE = SEQUENCE_DIGITS + 1 + 7 + 1
MIN_RECORD_SIZE = 32

Record = tuple[bytes, bytes, int | None]


class WorkloadError(ValueError):
    """A workload spec that cannot be generated; the message names the bad field."""


@dataclass(frozen=True)
class WorkloadSpec:
    """What to produce: `records` records of `record_size` value bytes, keyed by one of
    `keys` keys drawn uniformly or zipf-skewed; `partitions` None leaves the partition to the
    producer's partitioner, a count makes the workload choose one per key."""

    records: int
    record_size: int = 1024
    keys: int = 1000
    key_distribution: KeyDistribution = "uniform"
    partitions: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 <= self.records <= MAX_RECORDS:
            raise WorkloadError(f"records must be between 0 and {MAX_RECORDS}, not {self.records}")
        if self.record_size < MIN_RECORD_SIZE:
            raise WorkloadError(
                f"record size must be at least {MIN_RECORD_SIZE} bytes, not {self.record_size}"
            )
        if not 1 <= self.keys <= MAX_KEYS:
            raise WorkloadError(f"keys must be between 1 and {MAX_KEYS}, not {self.keys}")
        if self.key_distribution not in DISTRIBUTIONS:
            raise WorkloadError(
                f"key distribution must be uniform or zipf, not {self.key_distribution!r}"
            )
        if self.partitions is not None and self.partitions < 1:
            raise WorkloadError(f"partitions must be at least 1, not {self.partitions}")


# ---- the PRNG ------------------------------------------------------------------------------------


def splitmix64(x: int) -> int:
    """One step of splitmix64 (Steele, Lea, Flood 2014): a 64-bit mix of a 64-bit input."""
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


# One stream of draws per purpose (stream numbers are arbitrary but fixed forever).
KEY_STREAM, PAD_STREAM, PARTITION_STREAM = 1, 2, 3


@functools.lru_cache(maxsize=64)
def _stream_base(seed: int, stream: int) -> int:
    # Independent streams per purpose (key choice, padding, partition), so changing how one
    # is used never shifts the others.
    return splitmix64(splitmix64(seed & MASK64) ^ stream)


def draw(seed: int, stream: int, i: int) -> int:
    """The 64-bit draw number `i` of `stream` under `seed`."""
    return splitmix64((_stream_base(seed, stream) + i) & MASK64)


# ---- keys ----------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=8)
def zipf_table(keys: int, exponent: float = ZIPF_EXPONENT) -> tuple[int, ...]:
    """The inverse CDF of zipf over `keys` ranks as integer thresholds: key k is chosen when a
    53-bit draw is below entry k and not below entry k-1; the last entry is 2**53."""
    weights = [1.0 / (rank**exponent) for rank in range(1, keys + 1)]
    total = sum(weights)
    scale = float(1 << DRAW_BITS)
    thresholds = []
    cumulative = 0.0
    for w in weights:
        cumulative += w
        thresholds.append(min(int(cumulative / total * scale), 1 << DRAW_BITS))
    thresholds[-1] = 1 << DRAW_BITS  # rounding must not leave a gap at the top
    return tuple(thresholds)


def key_index(spec: WorkloadSpec, i: int) -> int:
    """Which of the spec's keys record `i` carries (0 is the most frequent under zipf)."""
    x = draw(spec.seed, KEY_STREAM, i)
    if spec.key_distribution == "uniform":
        # Multiply-shift maps 64 bits onto [0, keys) with negligible bias and no division.
        return (x * spec.keys) >> 64
    return bisect.bisect_right(zipf_table(spec.keys), x >> (64 - DRAW_BITS))


def key_bytes(index: int) -> bytes:
    return b"k%06d" % index


def key_partition(spec: WorkloadSpec, index: int) -> int | None:
    """The partition of a key when the workload chooses (a seeded hash, so the hottest zipf
    keys do not all land on partition 0), or None for the producer's partitioner."""
    if spec.partitions is None:
        return None
    return draw(spec.seed, PARTITION_STREAM, index) % spec.partitions


# ---- records -------------------------------------------------------------------------------------


def value_bytes(spec: WorkloadSpec, i: int, index: int) -> bytes:
    header = b"%012d|%s|" % (i, key_bytes(index))
    pad = spec.record_size - len(header)
    # Padding from the record's own draw: every value differs along its whole length.
    chunk = b"%016x" % draw(spec.seed, PAD_STREAM, i)
    return header + (chunk * (pad // len(chunk) + 1))[:pad]


def record(spec: WorkloadSpec, i: int) -> Record:
    """Record `i` (0 <= i < spec.records): (key, value, partition or None)."""
    index = key_index(spec, i)
    return key_bytes(index), value_bytes(spec, i, index), key_partition(spec, index)


def parse_value(value: bytes) -> tuple[int, int]:
    """(sequence number, key index) written into a value by `record`; raises WorkloadError
    for bytes this workload did not write."""
    parts = value.split(b"|", 2)
    if len(parts) != 3 or len(parts[0]) != SEQUENCE_DIGITS or not parts[1].startswith(b"k"):
        raise WorkloadError(f"not a load generator value: {value[:40]!r}")
    try:
        return int(parts[0]), int(parts[1][1:])
    except ValueError:
        raise WorkloadError(f"not a load generator value: {value[:40]!r}") from None
