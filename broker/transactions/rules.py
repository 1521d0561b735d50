"""The transaction coordinator's answers to InitProducerId, AddPartitionsToTxn/AddOffsetsToTxn
and EndTxn, and its timers, as Kafka 2.6's `TransactionCoordinator` and
`TransactionStateManager` decide them (handleInitProducerId with KIP-360's
prepareInitProducerIdTransit, handleAddPartitionsToTransaction, endTransaction,
timedOutTransactions, the transactional-id expiration). Pure: each rule takes the metadata and
`now_ms` and returns an error code to answer, or the Transit to write to `__transaction_state`
first (the metadata is then pending until `complete` or `abandon`).

Kafka's test names for these rules: TransactionCoordinatorTest (shouldRespondWithInvalid
RequestOnInitPidWhenTransactionalIdIsEmpty, shouldAbortTransactionOnHandleInitPidWhenExisting
TransactionInOngoingState, shouldFenceProducerWhenEpochIsExhausted..., shouldReturnInvalid
TxnRequestOnEndTxnRequestWhenStatusIsCompleteAbortAndResultIsNotAbort, shouldAbortExpired
TransactionsInOngoingStateAndBumpEpoch, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from broker.transactions.txn_metadata import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    Transit,
    TransitionError,
    TxnMetadata,
    epoch_exhausted,
)
from minibroker.core.coordinator_log.txn_records import TxnState
from minibroker.core.errors import ErrorCode

S = TxnState
E = ErrorCode
# Where a transaction ended with a bumped epoch may be asked again with the old one.
BUMPED_STATES = frozenset({S.PREPARE_COMMIT, S.PREPARE_ABORT, S.COMPLETE_COMMIT, S.COMPLETE_ABORT})


@dataclass(frozen=True)
class Fence:
    """InitProducerId met an ongoing transaction: abort it with the bumped epoch (never given
    to a client) and answer CONCURRENT_TRANSACTIONS, so that the producer retries and the
    epoch is bumped again."""

    transit: Transit


def new_metadata(
    transactional_id: str, producer_id: int, timeout_ms: int, now_ms: int
) -> TxnMetadata:
    """A transactional id the coordinator has not seen (Empty, no epoch yet)."""
    return TxnMetadata(
        transactional_id, producer_id, NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_PRODUCER_EPOCH,
        timeout_ms, S.EMPTY, set(), -1, now_ms,
    )  # fmt: skip


def valid_timeout(timeout_ms: int, max_timeout_ms: int) -> bool:
    """validateTransactionTimeoutMs: transaction.max.timeout.ms caps what a producer asks."""
    return 0 < timeout_ms <= max_timeout_ms


def init_producer_id(
    meta: TxnMetadata,
    timeout_ms: int,
    expected: tuple[int, int] | None,
    next_producer_id: Callable[[], int],
    now_ms: int,
) -> ErrorCode | Transit | Fence:
    """prepareInitProducerIdTransit, for an id that passed the checks before it (non-empty,
    valid timeout). `expected` is the request's (producer id, epoch) when it carries one
    (KIP-360: a producer recovering from an abortable error bumps its own epoch)."""
    if meta.pending_in_progress:
        return E.CONCURRENT_TRANSACTIONS
    if expected is not None:
        pid, epoch = expected
        valid = (
            meta.producer_epoch == NO_PRODUCER_EPOCH
            or pid == meta.producer_id
            or (pid == meta.last_producer_id and epoch_exhausted(epoch))
        )
        if not valid:
            return E.INVALID_PRODUCER_EPOCH
    if meta.state in (S.PREPARE_ABORT, S.PREPARE_COMMIT):
        return E.CONCURRENT_TRANSACTIONS
    if meta.state == S.ONGOING:
        return Fence(meta.prepare_fence_producer_epoch())
    if meta.state in (S.COMPLETE_ABORT, S.COMPLETE_COMMIT, S.EMPTY):
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            return meta.prepare_producer_id_rotation(
                next_producer_id(), timeout_ms, now_ms, expected is not None
            )
        transit = meta.prepare_increment_producer_epoch(
            timeout_ms, None if expected is None else expected[1], now_ms
        )
        return E.INVALID_PRODUCER_EPOCH if transit is None else transit
    raise TransitionError(f"{meta.transactional_id} is {meta.state.name}: never reachable")


def add_partitions(
    meta: TxnMetadata | None,
    producer_id: int,
    epoch: int,
    partitions: frozenset[tuple[str, int]],
    now_ms: int,
) -> ErrorCode | Transit:
    """handleAddPartitionsToTransaction (AddOffsetsToTxn adds the group's
    `__consumer_offsets` partition the same way). NONE: nothing to write, answer at once."""
    if meta is None or meta.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return E.INVALID_PRODUCER_EPOCH
    if meta.pending_in_progress or meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return E.CONCURRENT_TRANSACTIONS
    if meta.state == S.ONGOING and partitions <= meta.partitions:
        return E.NONE
    return meta.prepare_add_partitions(partitions, now_ms)


def verify_partitions(
    meta: TxnMetadata | None, producer_id: int, epoch: int, partitions: Iterable[tuple[str, int]]
) -> ErrorCode | dict[tuple[str, int], ErrorCode]:
    """A leader's question with transaction.partition.verification.enable (KIP-890 part 1,
    Kafka 3.6's TransactionCoordinator.handleVerifyPartitionsInTransaction): an error for every
    partition, or each partition's answer, NONE when it is in the producer's transaction and
    INVALID_TXN_STATE when not (the partitions are cleared when a transaction completes, so
    after its markers nothing is in it). A pending write is not looked at: the leader's
    append checks its guard last. Nothing is written."""
    if meta is None or meta.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return E.INVALID_PRODUCER_EPOCH  # Kafka 3.6: PRODUCER_FENCED, a code 2.6 has not
    if meta.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT):
        return E.CONCURRENT_TRANSACTIONS
    return {tp: E.NONE if tp in meta.partitions else E.INVALID_TXN_STATE for tp in partitions}


def end_txn(
    meta: TxnMetadata | None,
    producer_id: int,
    epoch: int,
    commit: bool,
    from_client: bool,
    now_ms: int,
    bump: bool = False,
) -> ErrorCode | Transit:
    """endTransaction's first step: PrepareCommit/PrepareAbort to write, or the answer.
    Not from a client: the coordinator's own abort (a fence or a timeout), which carries the
    fenced epoch and turns the pending fence into PrepareAbort. `bump` (KIP-890 part 2, a
    client's EndTxn v5 with transaction.version 2; Kafka 4.0's endTransaction with
    TransactionVersion 2): the prepared state carries the producer epoch + 1, so the markers
    and the producer's next transaction have it and nothing of the old epoch is appended
    again; a retry of the same EndTxn carries the old epoch, now the last one."""
    if meta is None or meta.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if bump and meta.state in BUMPED_STATES and meta.last_producer_epoch != NO_PRODUCER_EPOCH:
        if epoch != meta.last_producer_epoch:  # Kafka 4.0: PRODUCER_FENCED, a code 2.6 has not
            return E.INVALID_PRODUCER_EPOCH
        epoch = meta.producer_epoch  # a retry: answered as the bumped epoch's own
    elif (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
        return E.INVALID_PRODUCER_EPOCH
    if meta.pending_in_progress and meta.pending != S.PREPARE_EPOCH_FENCE:
        return E.CONCURRENT_TRANSACTIONS
    state = meta.state
    if state == S.ONGOING:
        target = S.PREPARE_COMMIT if commit else S.PREPARE_ABORT
        if target == S.PREPARE_ABORT and meta.pending == S.PREPARE_EPOCH_FENCE:
            meta.pending = None
            meta.producer_epoch, meta.last_producer_epoch = epoch, NO_PRODUCER_EPOCH
        elif bump and not meta.epoch_exhausted:
            return meta.prepare_abort_or_commit(target, now_ms, bump=True)
        return meta.prepare_abort_or_commit(target, now_ms)
    if state == S.COMPLETE_COMMIT:
        return E.NONE if commit else E.INVALID_TXN_STATE
    if state == S.COMPLETE_ABORT:
        return E.INVALID_TXN_STATE if commit else E.NONE
    if state == S.PREPARE_COMMIT:
        return E.CONCURRENT_TRANSACTIONS if commit else E.INVALID_TXN_STATE
    if state == S.PREPARE_ABORT:
        return E.INVALID_TXN_STATE if commit else E.CONCURRENT_TRANSACTIONS
    if state == S.EMPTY:
        return E.INVALID_TXN_STATE
    raise TransitionError(f"{meta.transactional_id} is {state.name}: never reachable")


def after_prepare_written(
    meta: TxnMetadata, producer_id: int, epoch: int, commit: bool, now_ms: int
) -> ErrorCode | Transit:
    """endTransaction's second step, once PrepareCommit/PrepareAbort is in the log: the
    Complete state to write after the markers (the client is answered NONE now)."""
    if meta.producer_id != producer_id:
        return E.INVALID_PRODUCER_ID_MAPPING
    if meta.producer_epoch != epoch:
        return E.INVALID_PRODUCER_EPOCH
    if meta.pending_in_progress:
        return E.CONCURRENT_TRANSACTIONS
    if meta.state == (S.PREPARE_COMMIT if commit else S.PREPARE_ABORT):
        return meta.prepare_complete(now_ms)
    return E.INVALID_TXN_STATE


def timed_out(metas: Iterable[TxnMetadata], now_ms: int) -> list[TxnMetadata]:
    """timedOutTransactions: Ongoing, nothing pending, started more than its timeout ago."""
    return [
        m
        for m in metas
        if not m.pending_in_progress and m.state == S.ONGOING and m.start_ms + m.timeout_ms < now_ms
    ]


def expired_ids(metas: Iterable[TxnMetadata], now_ms: int, expiration_ms: int) -> list[TxnMetadata]:
    """transactional.id.expiration.ms: ids with no transaction in flight, not updated for
    that long, are removed (a tombstone is written)."""
    return [
        m
        for m in metas
        if m.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
        and not m.pending_in_progress
        and m.last_update_ms <= now_ms - expiration_ms
    ]
