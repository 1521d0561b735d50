"""One transactional id's state at its transaction coordinator, and the transitions between
states, as Kafka 2.6's `TransactionMetadata` (kafka/coordinator/transaction/
TransactionMetadata.scala). Pure: no I/O, no clock (times come in as arguments).

A change is two steps, because it is written to `__transaction_state` first: `prepare_*`
returns a Transit (what the record will say) and marks the state pending, `complete(transit)`
applies it once the append is acknowledged, `abandon()` drops it when the append failed.
While a change is pending the coordinator answers CONCURRENT_TRANSACTIONS.

validPreviousStates (the only transitions allowed):
  Empty <- Empty, CompleteCommit, CompleteAbort
  Ongoing <- Ongoing, Empty, CompleteCommit, CompleteAbort
  PrepareCommit <- Ongoing;  PrepareAbort <- Ongoing, PrepareEpochFence
  CompleteCommit <- PrepareCommit;  CompleteAbort <- PrepareAbort
  Dead <- Empty, CompleteAbort, CompleteCommit;  PrepareEpochFence <- Ongoing
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minibroker.core.coordinator_log.txn_records import TxnState, TxnValue

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
EPOCH_MAX = 2**15 - 1  # Short.MaxValue

S = TxnState
VALID_PREVIOUS: dict[TxnState, frozenset[TxnState]] = {
    S.EMPTY: frozenset({S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.ONGOING: frozenset({S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT}),
    S.PREPARE_COMMIT: frozenset({S.ONGOING}),
    S.PREPARE_ABORT: frozenset({S.ONGOING, S.PREPARE_EPOCH_FENCE}),
    S.COMPLETE_COMMIT: frozenset({S.PREPARE_COMMIT}),
    S.COMPLETE_ABORT: frozenset({S.PREPARE_ABORT}),
    S.DEAD: frozenset({S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT}),
    S.PREPARE_EPOCH_FENCE: frozenset({S.ONGOING}),
}


def epoch_exhausted(epoch: int) -> bool:
    """TransactionMetadata.isEpochExhausted: the last epoch is kept for fencing."""
    return epoch >= EPOCH_MAX - 1


class TransitionError(RuntimeError):
    """A transition Kafka calls illegal ("this should not happen"): a bug, never a client's
    mistake (clients' mistakes are answered with error codes before a transition is made)."""


@dataclass(frozen=True)
class Transit:
    """TxnTransitMetadata: the state a pending change leads to (and the record it writes)."""

    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]]
    start_ms: int
    last_update_ms: int

    def value(self) -> TxnValue:
        """The `__transaction_state` record; a fence is written as PrepareAbort."""
        state = S.PREPARE_ABORT if self.state == S.PREPARE_EPOCH_FENCE else self.state
        return TxnValue(
            self.producer_id, self.producer_epoch, self.timeout_ms, state,
            self.partitions, self.last_update_ms, self.start_ms,
        )  # fmt: skip


@dataclass
class TxnMetadata:
    transactional_id: str
    producer_id: int
    last_producer_id: int
    producer_epoch: int
    last_producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: set[tuple[str, int]] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    pending: TxnState | None = None
    failed_epoch_fence: bool = False

    @classmethod
    def loaded(cls, transactional_id: str, v: TxnValue) -> TxnMetadata:
        """From a record (readTxnRecordValue: the previous producer id and epoch are not kept)."""
        return cls(
            transactional_id, v.producer_id, NO_PRODUCER_ID, v.producer_epoch, NO_PRODUCER_EPOCH,
            v.timeout_ms, v.state, set(v.partitions), v.start_ms, v.last_update_ms,
        )  # fmt: skip

    # ---- what the coordinator asks -------------------------------------------------------

    @property
    def pending_in_progress(self) -> bool:
        return self.pending is not None

    @property
    def has_pending_transaction(self) -> bool:
        return self.state in (S.ONGOING, S.PREPARE_ABORT, S.PREPARE_COMMIT)

    @property
    def epoch_exhausted(self) -> bool:
        return epoch_exhausted(self.producer_epoch)

    # ---- prepare ---------------------------------------------------------------------------

    def prepare_fence_producer_epoch(self) -> Transit:
        if self.producer_epoch == EPOCH_MAX:
            raise TransitionError("cannot fence a producer at epoch Short.MaxValue")
        bumped = self.producer_epoch if self.failed_epoch_fence else self.producer_epoch + 1
        return self._prepare(
            S.PREPARE_EPOCH_FENCE, self.producer_id, bumped, NO_PRODUCER_EPOCH, self.timeout_ms,
            frozenset(self.partitions), self.start_ms, self.last_update_ms,
        )  # fmt: skip

    def prepare_increment_producer_epoch(
        self, timeout_ms: int, expected_epoch: int | None, now_ms: int
    ) -> Transit | None:
        """None: the expected epoch is neither the current nor the previous one
        (INVALID_PRODUCER_EPOCH)."""
        if self.epoch_exhausted:
            raise TransitionError(f"no producer epoch left for producer {self.producer_id}")
        bumped = self.producer_epoch + 1
        if expected_epoch is None:
            epoch, last = bumped, NO_PRODUCER_EPOCH
        elif self.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == self.producer_epoch:
            epoch, last = bumped, self.producer_epoch
        elif expected_epoch == self.last_producer_epoch:
            epoch, last = self.producer_epoch, self.last_producer_epoch  # a retried bump
        else:
            return None
        return self._prepare(
            S.EMPTY, self.producer_id, epoch, last, timeout_ms, frozenset(), -1, now_ms
        )

    def prepare_producer_id_rotation(
        self, new_producer_id: int, timeout_ms: int, now_ms: int, record_last_epoch: bool
    ) -> Transit:
        if self.has_pending_transaction:
            raise TransitionError("cannot rotate producer ids while a transaction is pending")
        last = self.producer_epoch if record_last_epoch else NO_PRODUCER_EPOCH
        return self._prepare(S.EMPTY, new_producer_id, 0, last, timeout_ms, frozenset(), -1, now_ms)

    def prepare_add_partitions(self, added: frozenset[tuple[str, int]], now_ms: int) -> Transit:
        fresh = self.state in (S.EMPTY, S.COMPLETE_ABORT, S.COMPLETE_COMMIT)
        return self._prepare(
            S.ONGOING, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(self.partitions) | added,
            now_ms if fresh else self.start_ms, now_ms,
        )  # fmt: skip

    def prepare_abort_or_commit(self, state: TxnState, now_ms: int, bump: bool = False) -> Transit:
        """`bump` (KIP-890 part 2): the next epoch, the current one becoming the last."""
        epoch, last = (
            (self.producer_epoch + 1, self.producer_epoch)
            if bump
            else (self.producer_epoch, self.last_producer_epoch)
        )
        return self._prepare(
            state, self.producer_id, epoch, last, self.timeout_ms, frozenset(self.partitions),
            self.start_ms, now_ms,
        )  # fmt: skip

    def prepare_complete(self, now_ms: int) -> Transit:
        state = S.COMPLETE_COMMIT if self.state == S.PREPARE_COMMIT else S.COMPLETE_ABORT
        self.failed_epoch_fence = False
        return self._prepare(
            state, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(), self.start_ms, now_ms,
        )  # fmt: skip

    def prepare_dead(self) -> Transit:
        return self._prepare(
            S.DEAD, self.producer_id, self.producer_epoch, self.last_producer_epoch,
            self.timeout_ms, frozenset(), self.start_ms, self.last_update_ms,
        )  # fmt: skip

    def _prepare(
        self,
        state: TxnState,
        producer_id: int,
        epoch: int,
        last_epoch: int,
        timeout_ms: int,
        partitions: frozenset[tuple[str, int]],
        start_ms: int,
        now_ms: int,
    ) -> Transit:
        if self.pending is not None:
            raise TransitionError(f"{self.transactional_id}: {self.pending.name} is pending")
        if producer_id < 0 or epoch < 0:
            raise TransitionError(f"illegal producer id {producer_id} or epoch {epoch}")
        if self.state not in VALID_PREVIOUS[state]:
            raise TransitionError(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        self.pending = state
        return Transit(
            producer_id, self.producer_id, epoch, last_epoch, timeout_ms, state, partitions,
            start_ms, now_ms,
        )  # fmt: skip

    # ---- complete --------------------------------------------------------------------------

    def abandon(self) -> None:
        """The record was not written: nothing changes (Kafka resets pendingState)."""
        self.pending = None

    def complete(self, t: Transit) -> None:
        """completeTransitionTo: the record is written; apply it after checking it is the one
        that was prepared."""
        if self.pending != t.state:
            self._fail(t)
        same_producer = (t.producer_epoch, t.producer_id) == (self.producer_epoch, self.producer_id)
        if t.state == S.EMPTY:
            bump = t.producer_epoch == self.producer_epoch + 1 or (
                t.producer_epoch == 0 and t.producer_id != self.producer_id
            )
            if (self.producer_epoch != t.producer_epoch and not bump) or t.partitions:
                self._fail(t)
            if t.start_ms != -1:
                self._fail(t)
            self.timeout_ms, self.producer_epoch = t.timeout_ms, t.producer_epoch
            self.last_producer_epoch, self.producer_id = t.last_producer_epoch, t.producer_id
            self.last_producer_id = t.last_producer_id
        elif t.state == S.ONGOING:
            if not same_producer or not self.partitions <= t.partitions:
                self._fail(t)
            if self.timeout_ms != t.timeout_ms:
                self._fail(t)
            self.start_ms = t.start_ms
            self.partitions |= t.partitions
        elif t.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
            unchanged = (set(t.partitions), t.timeout_ms, t.start_ms) == (
                self.partitions,
                self.timeout_ms,
                self.start_ms,
            )
            next_epochs = (self.producer_epoch + 1, self.producer_epoch)  # KIP-890 part 2
            bumped = t.producer_id == self.producer_id and (
                t.producer_epoch, t.last_producer_epoch
            ) == next_epochs  # fmt: skip
            if not (same_producer or bumped) or not unchanged:
                self._fail(t)
            self.producer_epoch, self.last_producer_epoch = t.producer_epoch, t.last_producer_epoch
        elif t.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT):
            if not same_producer or self.timeout_ms != t.timeout_ms or t.start_ms == -1:
                self._fail(t)
            self.start_ms = t.start_ms
            self.partitions.clear()
        else:  # a fence is never completed (it becomes PrepareAbort); Dead is removed, not kept
            self._fail(t)
        self.last_update_ms = t.last_update_ms
        self.pending = None
        self.state = t.state

    def _fail(self, t: Transit) -> None:
        raise TransitionError(f"{self.transactional_id}: transition to {t} does not follow {self}")
