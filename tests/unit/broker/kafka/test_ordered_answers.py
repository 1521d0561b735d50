"""A Kafka connection's answers leave in request order while Produce requests overlap
(broker/kafka/answers.py): a later answer that is ready first waits for the earlier ones, a
failing request ends the connection after the answers before it, and the reader stops at
MAX_OVERLAPPING_PRODUCES unanswered requests."""

from __future__ import annotations

import asyncio

import pytest

from broker.kafka.answers import MAX_OVERLAPPING_PRODUCES, OrderedAnswers
from broker.kafka.errors import CloseConnection


def run(coro: object) -> None:
    asyncio.run(coro)  # type: ignore[arg-type]


def test_a_later_answer_ready_first_is_written_after_the_earlier_one() -> None:
    async def main() -> None:
        written: list[bytes] = []
        closed: list[bool] = []

        async def write(b: bytes) -> None:
            written.append(b)

        answers = OrderedAnswers(write, lambda: closed.append(True))
        slow: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        answers.start(slow)
        answers.start(asyncio.sleep(0, b"second"))
        answers.start(asyncio.sleep(0, None))  # acks=0: no answer at all
        await asyncio.sleep(0.01)
        assert written == []  # the second is done, but the first is not
        slow.set_result(b"first")
        await answers.all_written()
        assert written == [b"first", b"second"] and not closed
        await answers.close()

    run(main())


def test_a_failed_answer_ends_the_connection_after_the_answers_before_it() -> None:
    async def main() -> None:
        written: list[bytes] = []
        closed: list[bool] = []

        async def write(b: bytes) -> None:
            written.append(b)

        async def fails() -> bytes:
            raise CloseConnection("Produce failed on the broker")

        answers = OrderedAnswers(write, lambda: closed.append(True))
        answers.start(asyncio.sleep(0, b"before"))
        answers.start(fails())
        answers.start(asyncio.sleep(0, b"after"))
        with pytest.raises(CloseConnection):
            await answers.all_written()
        assert written == [b"before"] and closed == [True]
        with pytest.raises(CloseConnection):
            await answers.room()
        await answers.close()

    run(main())


def test_the_reader_waits_while_the_limit_of_unanswered_produces_is_reached() -> None:
    async def main() -> None:
        async def write(_b: bytes) -> None:
            return None

        answers = OrderedAnswers(write, lambda: None)
        gate: asyncio.Future[bytes | None] = asyncio.get_running_loop().create_future()
        for _ in range(MAX_OVERLAPPING_PRODUCES):
            answers.start(asyncio.shield(gate))
        room = asyncio.ensure_future(answers.room())
        await asyncio.sleep(0.01)
        assert not room.done()
        gate.set_result(b"x")
        await asyncio.wait_for(room, 1)
        await answers.close()

    run(main())
