"""Which partition a record goes to: Kafka's murmur2 for keyed records, a sticky partition for
keyless ones (KIP-480). Pure: the caller owns the per-topic sticky state and any randomness.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK32 = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: 32-bit MurmurHash2, seed 0x9747b28c, as a signed Java int."""
    length = len(data)
    h = (_SEED ^ length) & _MASK32
    whole = length - length % 4
    # Little-endian words, as Kafka assembles them byte by byte.
    for (k,) in struct.iter_unpack("<I", data[:whole]):
        k = (k * _M) & _MASK32
        k ^= k >> _R
        k = (k * _M) & _MASK32
        h = ((h * _M) & _MASK32) ^ k
    tail = length % 4
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK32
    h ^= h >> 13
    h = (h * _M) & _MASK32
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs(), which overflows for MIN)."""
    return n & 0x7FFFFFFF


@dataclass
class StickyPartition:
    """One topic's sticky partition for keyless records.

    Kafka 2.4+ keeps sending keyless records to one partition until a new batch has to be
    started for it, then moves on, so batches fill up instead of every partition getting a
    tiny batch. Kafka picks the next partition at random; here it is the next one after
    `cursor` among the available partitions, so a run replays exactly. The producer seeds
    `cursor` randomly so that many producers do not all start on partition 0.
    """

    cursor: int = 0
    current: int | None = None


def partition_for(
    key: bytes | None,
    num_partitions: int,
    sticky: StickyPartition,
    available: Sequence[int] = (),
) -> int:
    """The partition of a record: murmur2 of the key, or the topic's sticky partition.

    `available` are the partitions that have a leader; keyless records prefer them, keyed
    records never do (a key must always map to the same partition).
    """
    if num_partitions <= 0:
        raise ValueError(f"a topic has at least one partition, got {num_partitions}")
    if key is not None:
        return to_positive(murmur2(key)) % num_partitions
    if sticky.current is None or sticky.current >= num_partitions:
        return next_sticky_partition(sticky, num_partitions, available)
    return sticky.current


def next_sticky_partition(
    sticky: StickyPartition, num_partitions: int, available: Sequence[int] = ()
) -> int:
    """Move the sticky partition on (Kafka's `onNewBatch`): called when a new batch has to be
    started for the current sticky partition. Avoids staying put when there is a choice."""
    candidates = [p for p in available if 0 <= p < num_partitions] or range(num_partitions)
    choice = candidates[sticky.cursor % len(candidates)]
    sticky.cursor += 1
    if choice == sticky.current and len(candidates) > 1:
        choice = candidates[sticky.cursor % len(candidates)]
        sticky.cursor += 1
    sticky.current = choice
    return choice
