"""The transaction coordinator of one broker (Kafka 2.6's TransactionCoordinator), on its loop.

A transactional id belongs to partition abs(hash(id)) % transaction.state.log.num.partitions
of `__transaction_state`; the leader of that partition coordinates it (FindCoordinator with key
type 1 answers that leader, creating the topic on first use). Every answer follows a pure rule
(rules.py) and every change is written to the partition first (state_manager.py). After
EndTxn's PrepareCommit/PrepareAbort is written the client is answered, and the markers go to
the partitions' leaders (marker_channel.py) before CompleteCommit/CompleteAbort is written; a
coordinator that takes over a partition completes the transactions its predecessor decided.
Transactions open longer than their timeout are aborted with a bumped epoch, which fences their
producer (abortTimedOutTransactions); ids idle for transactional.id.expiration.ms are removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from broker.log.log_types import wall_clock_ms
from broker.replica_manager import ReplicaManager
from broker.transactions import rules
from broker.transactions.marker_channel import MarkerChannel
from broker.transactions.markers import PendingMarkers
from broker.transactions.state_manager import TxnStateManager
from broker.transactions.txn_log import Unfinished
from broker.transactions.txn_metadata import Transit, TransitionError, TxnMetadata
from minibroker.core.coordinator_log.txn_records import TxnState
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TRANSACTION_STATE_TOPIC
from minibroker.runtime import logging as slog

E = ErrorCode
InitAnswer = tuple[ErrorCode, int, int]  # (error, producer id, epoch)


class TransactionCoordinator:
    def __init__(self, rm: ReplicaManager, next_producer_id: Callable[[], Awaitable[int]]) -> None:
        self.rm = rm
        self.state = TxnStateManager(rm, self._on_loaded)
        self.channel = MarkerChannel(rm)
        self._next_producer_id = next_producer_id
        s = rm.settings
        self.max_timeout_ms = s.get_int("transaction.max.timeout.ms")
        self.expiration_ms = s.get_int("transactional.id.expiration.ms")
        self._abort_every_s = (
            s.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        )
        self._expire_every_s = (
            s.get_int("transaction.remove.expired.transaction.cleanup.interval.ms") / 1000
        )
        self._tasks: set[asyncio.Task[Any]] = set()
        rm.leadership_listeners.append(self.state.on_leadership)

    def start(self) -> None:
        self._spawn(self._every(self._abort_every_s, self.abort_timed_out))
        self._spawn(self._every(self._expire_every_s, self.remove_expired))

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.state.stop()
        await self.channel.close()

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _every(self, seconds: float, job: Callable[[], Awaitable[None]]) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                await job()
            except Exception as exc:  # a timer never dies; the next round tries again
                slog.event("task_failed", logging.ERROR, task="txn_timer", error=repr(exc))

    # ---- where transactional ids are ---------------------------------------------------------

    async def find(self, transactional_id: str, listener: str) -> int | None:
        node = self.state.coordinator_of(transactional_id, listener)
        if node is None and TRANSACTION_STATE_TOPIC not in self.rm.metadata.topics():
            await self.state.create_topic()
        return node

    def _lookup(self, tid: str) -> tuple[ErrorCode, TxnMetadata | None, int]:
        error = self.state.state(tid)
        part = self.state.partition(tid)
        if error is not E.NONE or part is None:
            return (error if error is not E.NONE else E.NOT_COORDINATOR), None, -1
        return E.NONE, part.metas.get(tid), part.coordinator_epoch

    # ---- InitProducerId -----------------------------------------------------------------------

    async def init_producer_id(
        self, tid: str, timeout_ms: int, expected: tuple[int, int] | None
    ) -> InitAnswer:
        """handleInitProducerId for a transactional id."""
        if not tid:
            return E.INVALID_REQUEST, -1, -1
        if not rules.valid_timeout(timeout_ms, self.max_timeout_ms):
            return E.INVALID_TRANSACTION_TIMEOUT, -1, -1
        error, meta, epoch = self._lookup(tid)
        if error is not E.NONE:
            return error, -1, -1
        now = wall_clock_ms()
        if meta is None:
            fresh = rules.new_metadata(tid, await self._next_producer_id(), timeout_ms, now)
            part = self.state.partition(tid)
            if part is None or part.coordinator_epoch != epoch:
                return E.NOT_COORDINATOR, -1, -1
            meta = part.metas.setdefault(tid, fresh)
        spare = await self._next_producer_id() if meta.epoch_exhausted else -1
        decision = rules.init_producer_id(meta, timeout_ms, expected, lambda: spare, now)
        if isinstance(decision, ErrorCode):
            return decision, -1, -1
        if isinstance(decision, rules.Fence):
            # An ongoing transaction: aborted with the bumped epoch (never given to a
            # client); the producer retries on CONCURRENT_TRANSACTIONS.
            fenced = decision.transit.producer_epoch
            error = await self._end(meta, meta.producer_id, fenced, False, False, epoch)
            slog.event("txn_fenced", transactional_id=tid, producer_id=meta.producer_id,
                       epoch=fenced, cause="init_producer_id")  # fmt: skip
            return (error if error is not E.NONE else E.CONCURRENT_TRANSACTIONS), -1, -1
        error = await self.state.write(meta, decision, epoch)
        if error is not E.NONE:
            return error, -1, -1
        slog.event("txn_producer_initialized", transactional_id=tid,
                   producer_id=meta.producer_id, epoch=meta.producer_epoch)  # fmt: skip
        return E.NONE, meta.producer_id, meta.producer_epoch

    # ---- AddPartitionsToTxn / AddOffsetsToTxn -----------------------------------------------

    async def add_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: frozenset[tuple[str, int]]
    ) -> ErrorCode:
        error, meta, coordinator_epoch = self._lookup(tid)
        if error is not E.NONE:
            return error
        decision = rules.add_partitions(meta, producer_id, epoch, partitions, wall_clock_ms())
        if isinstance(decision, ErrorCode):
            return decision
        assert meta is not None
        error = await self.state.write(meta, decision, coordinator_epoch)
        if error is E.NONE and decision.start_ms == decision.last_update_ms:
            slog.event("txn_started", transactional_id=tid, producer_id=producer_id,
                       epoch=epoch, partitions=len(decision.partitions))  # fmt: skip
        return error

    # ---- a leader's verification (KIP-890 part 1) -----------------------------------------

    def verify_partitions(
        self, tid: str, producer_id: int, epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """Each partition's answer to a leader asking whether it is in the producer's
        ongoing transaction (rules.verify_partitions); NOT_COORDINATOR and the loading errors
        for all of them."""
        if not tid:
            return dict.fromkeys(partitions, E.INVALID_REQUEST)
        error, meta, _ = self._lookup(tid)
        if error is E.NONE:
            answer = rules.verify_partitions(meta, producer_id, epoch, partitions)
            if isinstance(answer, dict):
                return answer
            error = answer
        return dict.fromkeys(partitions, error)

    # ---- EndTxn ---------------------------------------------------------------------------

    async def end_txn(
        self, tid: str, producer_id: int, epoch: int, commit: bool, bump: bool = False
    ) -> InitAnswer:
        """EndTxn: the error, and the producer id and epoch the transaction ended with (the
        bumped epoch with `bump`, KIP-890 part 2)."""
        error, meta, coordinator_epoch = self._lookup(tid)
        if error is not E.NONE:
            return error, -1, -1
        if meta is None:
            return E.INVALID_PRODUCER_ID_MAPPING, -1, -1
        error = await self._end(meta, producer_id, epoch, commit, True, coordinator_epoch, bump)
        if error is not E.NONE:
            return error, -1, -1
        return error, meta.producer_id, meta.producer_epoch

    async def _end(
        self,
        meta: TxnMetadata,
        producer_id: int,
        epoch: int,
        commit: bool,
        from_client: bool,
        coordinator_epoch: int,
        bump: bool = False,
    ) -> ErrorCode:
        """endTransaction: PrepareCommit/PrepareAbort written (the answer), then the markers
        and CompleteCommit/CompleteAbort in the background."""
        fence = meta.pending == TxnState.PREPARE_EPOCH_FENCE
        now = wall_clock_ms()
        decision = rules.end_txn(meta, producer_id, epoch, commit, from_client, now, bump=bump)
        if isinstance(decision, ErrorCode):
            if fence:
                meta.abandon()
            return decision
        error = await self.state.write(meta, decision, coordinator_epoch)
        if error is not E.NONE:
            meta.failed_epoch_fence = fence
            return error
        complete = rules.after_prepare_written(
            meta, producer_id, meta.producer_epoch, commit, wall_clock_ms()
        )
        if isinstance(complete, ErrorCode):
            return complete
        self._spawn(self._finish(meta, commit, complete, coordinator_epoch))
        return E.NONE

    async def _finish(
        self, meta: TxnMetadata, commit: bool, complete: Transit, coordinator_epoch: int
    ) -> None:
        """The markers, then the Complete state (sendTxnMarkersCallback and its completion);
        an unexpected failure drops the pending state (the timeout or a new coordinator
        finishes the transaction) instead of leaving the id answering CONCURRENT_TRANSACTIONS."""
        try:
            await self._finish_once(meta, commit, complete, coordinator_epoch)
        except Exception as exc:
            slog.event("task_failed", logging.ERROR, task="txn_markers",
                       transactional_id=meta.transactional_id, error=repr(exc))  # fmt: skip
            meta.abandon()

    async def _finish_once(
        self, meta: TxnMetadata, commit: bool, complete: Transit, coordinator_epoch: int
    ) -> None:
        pending = PendingMarkers(
            meta.transactional_id, meta.producer_id, meta.producer_epoch, coordinator_epoch,
            commit, set(meta.partitions),
        )  # fmt: skip

        def still_here() -> bool:
            part = self.state.partition(meta.transactional_id)
            return part is not None and part.coordinator_epoch == coordinator_epoch

        partitions = len(pending.remaining)
        done = await self.channel.send(pending, still_here)
        if not done:
            meta.abandon()  # cancelled: a newer coordinator or producer finishes it
            return
        error = await self.state.write(meta, complete, coordinator_epoch)
        while error is E.COORDINATOR_NOT_AVAILABLE and still_here():  # retried, as Kafka's
            await asyncio.sleep(self.channel.backoff_s)
            error = await self.state.write(
                meta, meta.prepare_complete(wall_clock_ms()), coordinator_epoch
            )
        slog.event(
            "txn_committed" if commit else "txn_aborted", transactional_id=meta.transactional_id,
            producer_id=meta.producer_id, epoch=meta.producer_epoch, partitions=partitions,
            error=None if error is E.NONE else error.name,
        )  # fmt: skip

    # ---- a partition loaded: finish what the previous coordinator decided -------------------

    def _on_loaded(self, partition: int, todo: list[Unfinished]) -> None:
        part = self.state.loaded.get(partition)
        if part is None:
            return
        for u in todo:
            self._spawn(self._finish(u.meta, u.commit, u.transit, part.coordinator_epoch))

    # ---- timers ---------------------------------------------------------------------------

    async def abort_timed_out(self) -> None:
        """abortTimedOutTransactions: each with a bumped epoch, fencing its producer."""
        now = wall_clock_ms()
        for part in list(self.state.loaded.values()):
            for meta in rules.timed_out(list(part.metas.values()), now):
                try:
                    fence = meta.prepare_fence_producer_epoch()
                except TransitionError:
                    continue
                error = await self._end(
                    meta, meta.producer_id, fence.producer_epoch, False, False,
                    part.coordinator_epoch,
                )  # fmt: skip
                slog.event("txn_timed_out", transactional_id=meta.transactional_id,
                           producer_id=meta.producer_id, epoch=fence.producer_epoch,
                           error=None if error is E.NONE else error.name)  # fmt: skip

    async def remove_expired(self) -> None:
        now = wall_clock_ms()
        for part in list(self.state.loaded.values()):
            for meta in rules.expired_ids(list(part.metas.values()), now, self.expiration_ms):
                meta.prepare_dead()
                error = await self.state.remove(meta, part.coordinator_epoch)
                if error is E.NONE:
                    slog.event("txn_id_expired", transactional_id=meta.transactional_id)
