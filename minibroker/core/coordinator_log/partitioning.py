"""Which partition of a coordinator topic holds a key: Kafka's
`Utils.abs(key.hashCode) % partitionCount` (GroupMetadataManager.partitionFor,
TransactionStateManager.partitionFor), with Java's String.hashCode. Pure."""

from __future__ import annotations

from collections.abc import Iterable


def java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    for unit in _utf16_units(s):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _utf16_units(s: str) -> Iterable[int]:
    data = s.encode("utf-16-be", errors="surrogatepass")
    return (int.from_bytes(data[i : i + 2], "big") for i in range(0, len(data), 2))


def kafka_abs(n: int) -> int:
    """Kafka's Utils.abs: Integer.MIN_VALUE maps to 0, not to itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % partitions
