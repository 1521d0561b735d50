"""The transaction coordinator's rules, walked through as Kafka 2.6's TransactionCoordinatorTest
and TransactionMetadataTest do (the test names in comments are theirs)."""

from __future__ import annotations

import itertools

import pytest

from broker.transactions import rules
from broker.transactions.rules import Fence
from broker.transactions.txn_metadata import (
    EPOCH_MAX,
    NO_PRODUCER_EPOCH,
    Transit,
    TransitionError,
    TxnMetadata,
)
from minibroker.core.coordinator_log.txn_records import TxnState
from minibroker.core.errors import ErrorCode

S = TxnState
E = ErrorCode
TP = frozenset({("t", 0), ("t", 1)})


def pids() -> itertools.count[int]:
    return itertools.count(100)


def written(meta: TxnMetadata, outcome: object) -> Transit:
    assert isinstance(outcome, Transit), outcome
    meta.complete(outcome)
    return outcome


def initialised(now: int = 0) -> TxnMetadata:
    meta = rules.new_metadata("tx", 7, 60_000, now)
    written(meta, rules.init_producer_id(meta, 60_000, None, pids().__next__, now))
    return meta


def ongoing(now: int = 0) -> TxnMetadata:
    meta = initialised(now)
    written(meta, rules.add_partitions(meta, 7, 0, TP, now))
    return meta


def test_a_new_id_gets_epoch_0_and_each_init_bumps_it() -> None:
    # shouldInitPidWithEpochZeroForNewTransactionalId
    meta = initialised()
    assert (meta.producer_id, meta.producer_epoch, meta.state) == (7, 0, S.EMPTY)
    t = written(meta, rules.init_producer_id(meta, 30_000, None, pids().__next__, 5))
    assert (t.producer_epoch, t.last_producer_epoch, t.timeout_ms) == (1, NO_PRODUCER_EPOCH, 30_000)
    assert t.value().state == S.EMPTY and t.value().partitions == frozenset()


def test_timeouts_above_the_max_are_invalid() -> None:
    assert rules.valid_timeout(900_000, 900_000)
    assert not rules.valid_timeout(900_001, 900_000)
    assert not rules.valid_timeout(0, 900_000)


def test_add_partitions_starts_a_transaction_and_a_subset_is_answered_at_once() -> None:
    meta = initialised(now=1)
    t = written(meta, rules.add_partitions(meta, 7, 0, frozenset({("t", 0)}), 10))
    assert (meta.state, meta.start_ms, t.start_ms) == (S.ONGOING, 10, 10)
    t = written(meta, rules.add_partitions(meta, 7, 0, frozenset({("t", 1)}), 20))
    assert meta.partitions == set(TP) and meta.start_ms == 10 and meta.last_update_ms == 20
    # shouldRespondWithErrorsNoneOnAddPartitionWhenNoErrorsAndPartitionsTheSame
    assert rules.add_partitions(meta, 7, 0, frozenset({("t", 0)}), 30) == E.NONE


def test_add_partitions_errors() -> None:
    meta = ongoing()
    assert rules.add_partitions(None, 7, 0, TP, 1) == E.INVALID_PRODUCER_ID_MAPPING
    assert rules.add_partitions(meta, 8, 0, TP, 1) == E.INVALID_PRODUCER_ID_MAPPING
    assert rules.add_partitions(meta, 7, 1, TP, 1) == E.INVALID_PRODUCER_EPOCH
    written(meta, rules.end_txn(meta, 7, 0, True, True, 2))
    # shouldRespondWithConcurrentTransactionsOnAddPartitionsWhenStateIsPrepareCommit
    assert rules.add_partitions(meta, 7, 0, TP, 3) == E.CONCURRENT_TRANSACTIONS


def test_commit_goes_through_prepare_commit_to_complete_commit() -> None:
    meta = ongoing()
    t = written(meta, rules.end_txn(meta, 7, 0, True, True, 5))
    assert t.state == S.PREPARE_COMMIT and t.partitions == TP
    # a retried EndTxn while the markers are being written
    assert rules.end_txn(meta, 7, 0, True, True, 6) == E.CONCURRENT_TRANSACTIONS
    assert rules.end_txn(meta, 7, 0, False, True, 6) == E.INVALID_TXN_STATE
    t = written(meta, rules.after_prepare_written(meta, 7, 0, True, 7))
    assert meta.state == S.COMPLETE_COMMIT and meta.partitions == set() and t.start_ms == 0
    # shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIsCommit
    assert rules.end_txn(meta, 7, 0, True, True, 8) == E.NONE
    # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsCompleteCommitAndResultIsNotCommit
    assert rules.end_txn(meta, 7, 0, False, True, 8) == E.INVALID_TXN_STATE
    # a new transaction starts a new start time
    written(meta, rules.add_partitions(meta, 7, 0, TP, 50))
    assert meta.start_ms == 50


def test_end_txn_errors() -> None:
    meta = initialised()
    # shouldReturnInvalidTxnRequestOnEndTxnRequestWhenStatusIsEmpty... (Empty: no transaction)
    assert rules.end_txn(meta, 7, 0, True, True, 1) == E.INVALID_TXN_STATE
    assert rules.end_txn(None, 7, 0, True, True, 1) == E.INVALID_PRODUCER_ID_MAPPING
    meta = ongoing()
    # shouldReplyWithInvalidPidMappingOnEndTxnWhenPidDosentMatchMapped
    assert rules.end_txn(meta, 8, 0, True, True, 1) == E.INVALID_PRODUCER_ID_MAPPING
    # shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction
    assert rules.end_txn(meta, 7, 1, True, True, 1) == E.INVALID_PRODUCER_EPOCH
    pending = rules.add_partitions(meta, 7, 0, frozenset({("u", 0)}), 1)
    assert isinstance(pending, Transit)
    assert rules.end_txn(meta, 7, 0, True, True, 1) == E.CONCURRENT_TRANSACTIONS
    meta.abandon()  # the append failed: nothing changed
    assert meta.partitions == set(TP) and meta.pending is None


def test_init_during_an_ongoing_transaction_fences_and_aborts() -> None:
    # shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState
    meta = ongoing()
    fence = rules.init_producer_id(meta, 60_000, None, pids().__next__, 10)
    assert isinstance(fence, Fence) and fence.transit.producer_epoch == 1
    assert fence.transit.value().state == S.PREPARE_ABORT  # the log never holds a fence
    # the coordinator aborts with the bumped epoch, not from a client
    abort = written(meta, rules.end_txn(meta, 7, fence.transit.producer_epoch, False, False, 11))
    assert (abort.state, meta.producer_epoch, meta.last_producer_epoch) == (
        S.PREPARE_ABORT, 1, NO_PRODUCER_EPOCH,
    )  # fmt: skip
    # the old producer is fenced from here on
    assert rules.end_txn(meta, 7, 0, True, True, 12) == E.INVALID_PRODUCER_EPOCH
    written(meta, rules.after_prepare_written(meta, 7, 1, False, 12))
    assert meta.state == S.COMPLETE_ABORT
    # the producer's retry bumps the epoch again
    t = written(meta, rules.init_producer_id(meta, 60_000, None, pids().__next__, 13))
    assert t.producer_epoch == 2


def test_init_waits_while_a_transaction_is_completing() -> None:
    meta = ongoing()
    written(meta, rules.end_txn(meta, 7, 0, False, True, 1))
    # shouldRespondWithConcurrentTransactionOnInitPidWhenInPrepareAbortState
    assert rules.init_producer_id(meta, 1, None, pids().__next__, 2) == E.CONCURRENT_TRANSACTIONS


def test_kip_360_epoch_bump_by_the_producer_and_its_retry() -> None:
    meta = initialised()
    written(meta, rules.init_producer_id(meta, 60_000, None, pids().__next__, 1))  # epoch 1
    # shouldNotRepeatedlyBumpEpochDueToInitPidDuringOngoingTxnIfAppendToLogFails / a retry:
    t = written(meta, rules.init_producer_id(meta, 60_000, (7, 1), pids().__next__, 2))
    assert (t.producer_epoch, t.last_producer_epoch) == (2, 1)
    # the response was lost: the producer retries with the epoch it had
    retry = written(meta, rules.init_producer_id(meta, 60_000, (7, 1), pids().__next__, 3))
    assert (retry.producer_epoch, retry.last_producer_epoch) == (2, 1)
    # an epoch that is neither the current nor the last one is fenced
    assert rules.init_producer_id(meta, 1, (7, 0), pids().__next__, 4) == E.INVALID_PRODUCER_EPOCH
    # a producer id the coordinator does not know
    assert rules.init_producer_id(meta, 1, (9, 2), pids().__next__, 4) == E.INVALID_PRODUCER_EPOCH


def test_an_exhausted_epoch_rotates_the_producer_id() -> None:
    # shouldGenerateNewProducerIdIfEpochsExhausted
    meta = initialised()
    meta.producer_epoch = EPOCH_MAX - 1
    t = written(meta, rules.init_producer_id(meta, 60_000, None, pids().__next__, 1))
    assert (t.producer_id, t.producer_epoch, t.last_producer_id) == (100, 0, 7)
    # the rotation's answer was lost: the producer retries with its old id and exhausted epoch
    # and gets the same id and epoch again (the request recorded the epoch it expected)
    meta.last_producer_epoch = EPOCH_MAX - 1
    t = written(meta, rules.init_producer_id(meta, 60_000, (7, EPOCH_MAX - 1), pids().__next__, 2))
    assert (t.producer_id, t.producer_epoch) == (100, 0)


def test_timed_out_transactions_are_found_and_aborted_with_a_bumped_epoch() -> None:
    # shouldAbortExpiredTransactionsInOngoingStateAndBumpEpoch
    meta = ongoing(now=0)
    assert rules.timed_out([meta], 60_000) == []
    assert rules.timed_out([meta], 60_001) == [meta]
    fence = meta.prepare_fence_producer_epoch()
    abort = written(meta, rules.end_txn(meta, 7, fence.producer_epoch, False, False, 60_002))
    assert abort.state == S.PREPARE_ABORT and meta.producer_epoch == 1
    # shouldNotAbortExpiredTransactionsThatHaveAPendingStateTransition
    assert rules.timed_out([meta], 10**9) == []


def test_idle_ids_expire_but_never_with_a_transaction_in_flight() -> None:
    done, busy = initialised(now=0), ongoing(now=0)
    assert rules.expired_ids([done, busy], 1_000, 1_000) == [done]
    assert rules.expired_ids([done], 999, 1_000) == []
    dead = done.prepare_dead()
    assert dead.state == S.DEAD


def test_illegal_transitions_raise() -> None:
    meta = initialised()
    with pytest.raises(TransitionError):
        meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)  # Empty -> PrepareCommit
    meta = ongoing()
    meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 1)
    with pytest.raises(TransitionError, match="pending"):
        meta.prepare_add_partitions(TP, 2)
    meta.abandon()
    t = meta.prepare_add_partitions(TP, 3)
    meta.abandon()
    with pytest.raises(TransitionError):
        meta.complete(t)  # nothing pending
    with pytest.raises(TransitionError):
        meta.prepare_producer_id_rotation(101, 1, 1, False)  # a transaction is ongoing


def test_loaded_metadata_keeps_no_previous_producer() -> None:
    meta = ongoing()
    loaded = TxnMetadata.loaded("tx", meta.prepare_abort_or_commit(S.PREPARE_COMMIT, 5).value())
    assert (loaded.state, loaded.partitions, loaded.last_producer_epoch) == (
        S.PREPARE_COMMIT, set(TP), NO_PRODUCER_EPOCH,
    )  # fmt: skip
    assert loaded.start_ms == 0 and loaded.last_update_ms == 5


def test_a_leaders_verification_is_answered_per_partition() -> None:
    # KIP-890 part 1: Kafka 3.6's handleVerifyPartitionsInTransaction (testVerifyPartition
    # Handling, shouldRespondWithInvalidTxnStateWhenVerifyOnlyAndPartitionNotPresent)
    meta = ongoing()
    answer = rules.verify_partitions(meta, 7, 0, [("t", 0), ("t", 9)])
    assert answer == {("t", 0): E.NONE, ("t", 9): E.INVALID_TXN_STATE}
    assert rules.verify_partitions(None, 7, 0, [("t", 0)]) is E.INVALID_PRODUCER_ID_MAPPING
    assert rules.verify_partitions(meta, 8, 0, [("t", 0)]) is E.INVALID_PRODUCER_ID_MAPPING
    assert rules.verify_partitions(meta, 7, 1, [("t", 0)]) is E.INVALID_PRODUCER_EPOCH
    written(meta, rules.end_txn(meta, 7, 0, False, True, 1))
    assert rules.verify_partitions(meta, 7, 0, [("t", 0)]) is E.CONCURRENT_TRANSACTIONS
    written(meta, meta.prepare_complete(2))
    # Completed: its partitions are cleared, so a produce delayed past it is not in it.
    assert rules.verify_partitions(meta, 7, 0, [("t", 0)]) == {("t", 0): E.INVALID_TXN_STATE}


def test_with_an_epoch_bump_a_transaction_ends_at_the_next_epoch() -> None:
    # KIP-890 part 2 (Kafka 4.0's endTransaction with TransactionVersion 2; its
    # TransactionCoordinatorTest's shouldReturnOkOnEndTxnWhenStatusIsCompleteCommitAndResultIs
    # Commit(v2), shouldReplyWithProducerFencedOnEndTxnWhenEpochIsNotSameAsTransaction, with
    # 2.6's INVALID_PRODUCER_EPOCH for PRODUCER_FENCED)
    meta = ongoing()
    t = written(meta, rules.end_txn(meta, 7, 0, True, True, 1, bump=True))
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.PREPARE_COMMIT, 1, 0)
    assert rules.end_txn(meta, 7, 0, True, True, 2, bump=True) is E.CONCURRENT_TRANSACTIONS
    written(meta, meta.prepare_complete(3))
    assert (meta.state, meta.producer_epoch) == (S.COMPLETE_COMMIT, 1)
    # The client's retry carries the epoch it sent: answered as done.
    assert rules.end_txn(meta, 7, 0, True, True, 4, bump=True) is E.NONE
    assert rules.end_txn(meta, 7, 0, False, True, 4, bump=True) is E.INVALID_TXN_STATE
    assert rules.end_txn(meta, 7, 5, True, True, 4, bump=True) is E.INVALID_PRODUCER_EPOCH
    # What was delayed at the old epoch is refused; the next transaction has the new one.
    assert rules.add_partitions(meta, 7, 0, TP, 5) is E.INVALID_PRODUCER_EPOCH
    assert rules.verify_partitions(meta, 7, 0, [("t", 0)]) is E.INVALID_PRODUCER_EPOCH
    written(meta, rules.add_partitions(meta, 7, 1, TP, 5))
    t = written(meta, rules.end_txn(meta, 7, 1, False, True, 6, bump=True))
    assert (t.state, t.producer_epoch, t.last_producer_epoch) == (S.PREPARE_ABORT, 2, 1)


def test_without_the_bump_the_epoch_stays() -> None:
    meta = ongoing()
    t = written(meta, rules.end_txn(meta, 7, 0, True, True, 1))
    assert (t.producer_epoch, meta.producer_epoch) == (0, 0)
