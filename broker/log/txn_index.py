"""The aborted-transaction index of a segment (`<base>.txnindex`), as Kafka 2.6's
`TransactionIndex` keeps it: one 34-byte entry per aborted transaction whose ABORT marker is in
the segment, in the order the markers were appended. Pure: bytes in, entries out.

Entry (AbortedTxn, version 0): version INT16, producer id INT64, first offset INT64, last
offset INT64 (the marker's), last stable offset INT64 (the partition's LSO once the
transaction was aborted: where a read_committed reader may stop looking).

A read_committed fetch of [fetch_offset, upper_bound) gets every aborted transaction that
overlaps it (last >= fetch_offset and first < upper_bound), from the segment holding
fetch_offset onwards, until an entry's last stable offset reaches upper_bound
(TransactionIndex.collectAbortedTxns, Log.collectAbortedTransactions)."""

from __future__ import annotations

import itertools
import struct
from collections.abc import Iterable
from dataclasses import dataclass

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_BYTES = _ENTRY.size  # 34


class TxnIndexError(ValueError):
    """Bytes that are not a transaction index (recovery rebuilds the index from the log)."""


@dataclass(frozen=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def decode(data: bytes) -> list[AbortedTxn]:
    """Every entry; a torn tail (a partial entry, as a crash leaves it) is dropped, an entry of
    another version is an error (Kafka: "Unexpected aborted transaction version")."""
    whole = len(data) - len(data) % ENTRY_BYTES
    out = []
    for pos in range(0, whole, ENTRY_BYTES):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != VERSION:
            raise TxnIndexError(f"entry at byte {pos} has version {version}, not {VERSION}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def collect(
    entries: Iterable[AbortedTxn], fetch_offset: int, upper_bound: int
) -> tuple[list[AbortedTxn], bool]:
    """The entries overlapping [fetch_offset, upper_bound), and whether the search is complete
    (an entry's last stable offset reached upper_bound: later segments cannot add any)."""
    found = []
    for e in entries:
        if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
            found.append(e)
        if e.last_stable_offset >= upper_bound:
            return found, True
    return found, False


def truncated(entries: Iterable[AbortedTxn], log_end_offset: int) -> list[AbortedTxn]:
    """TransactionIndex.truncateTo: the entries before the first whose marker is cut off."""
    return list(itertools.takewhile(lambda e: e.last_offset < log_end_offset, entries))
