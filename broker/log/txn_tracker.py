"""A partition's transactions as its log shows them, and its last stable offset (LSO), as Kafka
2.6's `ProducerStateManager` (ongoingTxns, unreplicatedTxns, firstUnstableOffset,
lastStableOffset(completedTxn), completeTxn, onHighWatermarkUpdated) and `Log.lastStableOffset`
keep them. Pure: offsets in, decisions out; every replica runs it over the batches it appends.

- A producer's first transactional batch starts its transaction at that batch's base offset;
  a non-transactional batch from a producer with a transaction open is refused
  (INVALID_TXN_STATE, ProducerAppendInfo.appendDataBatch).
- With transaction.partition.verification.enable (KIP-890 part 1, Kafka 3.6's
  VerificationStateEntry): a producer with no transaction open here gets a *guard* when its
  leader starts asking the coordinator; its transactional batch is appended only with that
  guard, and any transactional batch or marker of the producer removes it
  (UnifiedLog.updateProducers), so an answer that arrives after a marker was written meanwhile
  cannot open a transaction (the ABA case KIP-890 names).
- A COMMIT/ABORT marker ends it (a marker with no open transaction is a transaction of the
  marker alone); the transaction stays *unreplicated* until the high watermark passes its
  marker. An ABORT yields the index entry, whose last stable offset is the first offset of
  the next open transaction of another producer (else the marker's offset + 1).
- The first unstable offset is the first offset of the earliest open or unreplicated
  transaction; the LSO is that offset when it is below the high watermark, else the high
  watermark (and never below the log start offset).
"""

from __future__ import annotations

from dataclasses import dataclass

from broker.log.txn_index import AbortedTxn


@dataclass(frozen=True)
class CompletedTxn:
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


@dataclass
class _Unreplicated:
    producer_id: int
    first_offset: int
    last_offset: int


class VerificationGuard:
    """One verification in flight for one producer (compared by identity)."""

    __slots__ = ()


class TxnTracker:
    def __init__(self) -> None:
        self._ongoing: dict[int, int] = {}  # producer id -> first offset of its open txn
        self._unreplicated: list[_Unreplicated] = []  # completed, marker at or above the HW
        self._verifying: dict[int, VerificationGuard] = {}  # producer id -> its guard

    # ---- the leader's check ----------------------------------------------------------------

    def refuses_data(self, producer_id: int, transactional: bool) -> bool:
        """A plain (non-transactional) batch from a producer with an open transaction."""
        return not transactional and producer_id in self._ongoing

    def open_first_offset(self, producer_id: int) -> int | None:
        return self._ongoing.get(producer_id)

    def start_verification(self, producer_id: int) -> VerificationGuard | None:
        """None when the producer has a transaction open here (the coordinator confirmed it
        when it began); else its guard, the one already in flight or a new one."""
        if producer_id in self._ongoing:
            return None
        return self._verifying.setdefault(producer_id, VerificationGuard())

    def refuses_unverified(self, producer_id: int, guard: VerificationGuard | None) -> bool:
        """With verification on: a transactional batch of a producer with no transaction open
        here whose request does not hold the producer's current guard."""
        if producer_id in self._ongoing:
            return False
        return guard is None or self._verifying.get(producer_id) is not guard

    # ---- every replica, as batches are appended ----------------------------------------------

    def on_data(self, producer_id: int, base_offset: int, transactional: bool) -> None:
        if transactional:
            self._verifying.pop(producer_id, None)
            self._ongoing.setdefault(producer_id, base_offset)

    def on_marker(
        self, producer_id: int, offset: int, commit: bool
    ) -> tuple[CompletedTxn, AbortedTxn | None]:
        """The transaction the marker ends, and for an ABORT its index entry."""
        self._verifying.pop(producer_id, None)
        first = self._ongoing.pop(producer_id, offset)
        done = CompletedTxn(producer_id, first, offset, not commit)
        self._unreplicated.append(_Unreplicated(producer_id, first, offset))
        self._unreplicated.sort(key=lambda u: u.first_offset)
        if commit:
            return done, None
        others = [f for pid, f in self._ongoing.items() if pid != producer_id]
        lso = min(others) if others else offset + 1
        return done, AbortedTxn(producer_id, first, offset, lso)

    def on_high_watermark(self, hw: int) -> None:
        self._unreplicated = [u for u in self._unreplicated if u.last_offset >= hw]

    # ---- the LSO -----------------------------------------------------------------------------

    def first_unstable_offset(self) -> int | None:
        firsts = [*self._ongoing.values(), *(u.first_offset for u in self._unreplicated)]
        return min(firsts) if firsts else None

    def last_stable_offset(self, hw: int, log_start: int) -> int:
        first = self.first_unstable_offset()
        if first is None:
            return hw
        first = max(first, log_start)  # Log.updateFirstUnstableOffset
        return first if first < hw else hw

    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of each open transaction (for describing)."""
        return dict(self._ongoing)

    # ---- truncation --------------------------------------------------------------------------

    def truncate_to(self, log_end_offset: int) -> None:
        """The log lost everything from log_end_offset: transactions that started there are
        gone, and one whose marker was cut off is open again."""
        self._ongoing = {p: f for p, f in self._ongoing.items() if f < log_end_offset}
        kept = []
        for u in self._unreplicated:
            if u.last_offset < log_end_offset:
                kept.append(u)
            elif u.first_offset < log_end_offset:
                self._ongoing[u.producer_id] = u.first_offset
        self._unreplicated = kept

    def clear(self) -> None:
        self._ongoing.clear()
        self._unreplicated.clear()
        self._verifying.clear()
