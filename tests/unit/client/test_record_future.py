"""A record's future settles with its batch and behaves as an asyncio future: awaited, gathered,
waited on, timed out, cancelled, with callbacks run by the loop."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from typing import TypeVar

import pytest

from minibroker.client.errors import ProduceError
from minibroker.client.record_future import BatchResult, RecordFuture
from minibroker.client.record_metadata import RecordMetadata
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

T = TypeVar("T")
TP = TopicPartition("t", 2)


def run(body: Callable[[], Awaitable[T]]) -> T:
    async def main() -> T:
        return await asyncio.wait_for(body(), 5)

    return asyncio.run(main())


def batch_of(n: int) -> tuple[BatchResult, list[RecordFuture]]:
    batch = BatchResult(TP, asyncio.get_running_loop())
    return batch, [RecordFuture(batch, i, 1000 + i) for i in range(n)]


def test_records_resolve_at_the_batch_offset_plus_their_index_with_their_timestamp() -> None:
    async def body() -> list[RecordMetadata]:
        batch, futures = batch_of(3)
        asyncio.get_running_loop().call_later(0.01, batch.complete, 40, -1)
        return [await f for f in futures]

    assert run(body) == [RecordMetadata("t", 2, 40 + i, 1000 + i) for i in range(3)]


def test_log_append_time_replaces_the_records_timestamp_and_no_offset_stays_minus_one() -> None:
    async def body() -> RecordMetadata:
        batch, (future,) = batch_of(1)
        batch.complete(-1, 777)
        return await future

    assert run(body) == RecordMetadata("t", 2, -1, 777)


def test_a_failed_batch_fails_every_record_with_its_error() -> None:
    error = ProduceError(ErrorCode.NOT_ENOUGH_REPLICAS, "too few")

    async def body() -> None:
        batch, futures = batch_of(2)
        batch.fail(error)
        for f in futures:
            assert f.done() and f.exception() is error
            with pytest.raises(ProduceError):
                await f
        batch.complete(5, -1)  # settles once: the failure stands
        assert futures[0].exception() is error

    run(body)


def test_an_unsettled_future_has_no_result_yet() -> None:
    async def body() -> None:
        _, (future,) = batch_of(1)
        assert not future.done() and not future.cancelled()
        with pytest.raises(asyncio.InvalidStateError):
            future.result()
        with pytest.raises(asyncio.InvalidStateError):
            future.exception()

    run(body)


def test_callbacks_run_through_the_loop_with_the_future_and_their_context() -> None:
    seen: list[tuple[str, RecordFuture, str]] = []
    var = contextvars.ContextVar("var", default="none")

    async def body() -> None:
        batch, (first, second) = batch_of(2)
        context = contextvars.copy_context()
        context.run(var.set, "caller's")
        first.add_done_callback(lambda f: seen.append(("first", f, var.get())), context=context)
        second.add_done_callback(lambda f: seen.append(("second", f, var.get())))
        batch.complete(0, -1)
        assert seen == []  # not called from inside complete()
        await asyncio.sleep(0)
        assert seen == [("first", first, "caller's"), ("second", second, "none")]
        late: list[RecordFuture] = []
        first.add_done_callback(late.append)  # already done: runs soon
        await asyncio.sleep(0)
        assert late == [first]

    run(body)


def test_a_removed_callback_is_not_called() -> None:
    called: list[RecordFuture] = []

    async def body() -> None:
        batch, (future,) = batch_of(1)
        future.add_done_callback(called.append)
        assert future.remove_done_callback(called.append) == 1
        batch.complete(0, -1)
        await asyncio.sleep(0)

    run(body)
    assert called == []


def test_asyncio_takes_it_for_a_future_in_gather_wait_and_shield() -> None:
    async def body() -> None:
        batch, futures = batch_of(3)
        assert all(asyncio.isfuture(f) for f in futures)
        asyncio.get_running_loop().call_later(0.01, batch.complete, 10, -1)
        # typeshed's asyncio.wait names asyncio.Future; at run time any future-like will do.
        done, pending = await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)  # type: ignore[type-var]
        assert pending == set() and set(done) == set(futures)
        results = await asyncio.gather(*futures)
        assert [r.offset for r in results] == [10, 11, 12]
        assert (await asyncio.shield(futures[1])).offset == 11

    run(body)


def test_a_timed_out_wait_cancels_only_the_waiters_future_and_the_batch_still_settles() -> None:
    async def body() -> None:
        batch, (waited, other) = batch_of(2)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(waited, 0.01)
        assert waited.cancelled() and waited.done() and not other.done()
        batch.complete(3, -1)
        assert waited.cancelled()
        with pytest.raises(asyncio.CancelledError):
            waited.result()
        assert (await other).offset == 4

    run(body)


def test_a_task_waiting_on_a_record_can_be_cancelled_at_once() -> None:
    async def body() -> None:
        _, (future,) = batch_of(1)

        async def wait_record() -> RecordMetadata:
            return await future

        waiter = asyncio.create_task(wait_record())
        await asyncio.sleep(0)
        waiter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert future.cancelled()

    run(body)


def test_gather_passes_on_a_cancelled_records_cancellation_and_its_message() -> None:
    async def body() -> None:
        batch, (first, second) = batch_of(2)
        second.cancel("not needed")
        batch.complete(0, -1)
        with pytest.raises(asyncio.CancelledError):
            await asyncio.gather(first, second)
        results = await asyncio.gather(first, second, return_exceptions=True)
        assert results[0] == first.result()
        assert isinstance(results[1], asyncio.CancelledError)
        assert results[1].args == ("not needed",)

    run(body)


def test_cancelling_a_gather_of_records_ends_it_while_the_batch_is_still_out() -> None:
    async def body() -> None:
        batch, futures = batch_of(3)
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*futures), 0.01)
        assert all(f.cancelled() for f in futures) and not batch.done

    run(body)
