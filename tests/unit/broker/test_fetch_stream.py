"""A follower's FetchStream against a real in-process gRPC server behind the broker's request
guard: answers come in order on one stream; a leader that does not answer in time, or ends the
stream, fails that fetch and the next one opens a new stream; a message that does not parse
ends the stream with INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import grpc
import pytest

from broker.fetch.stream import FetchStream, FetchStreamError
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.grpc_guard import RequestGuard

T = TypeVar("T")
HANG, END = 99, 77  # session ids the test leader treats specially


class _Leader(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    def __init__(self) -> None:
        self.streams = 0

    async def FetchStream(  # noqa: N802
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[broker_pb2.FetchResponse]:
        self.streams += 1
        async for request in requests:
            if request.session_id == HANG:
                await asyncio.sleep(30)
            if request.session_id == END:
                return
            yield broker_pb2.FetchResponse(session_id=request.session_id)


def request(n: int) -> broker_pb2.FetchRequest:
    return broker_pb2.FetchRequest(session_id=n, replica_id=2)


def with_leader(body: Callable[[_Leader, grpc.aio.Channel], Awaitable[T]]) -> T:
    async def main() -> T:
        leader = _Leader()
        server = grpc.aio.server(interceptors=[RequestGuard()])
        broker_pb2_grpc.add_BrokerServicer_to_server(leader, server)
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                return await asyncio.wait_for(body(leader, channel), 20)
        finally:
            await server.stop(None)

    return asyncio.run(main())


def test_fetches_are_answered_in_order_on_one_stream() -> None:
    async def body(leader: _Leader, channel: grpc.aio.Channel) -> tuple[list[int], int]:
        stream = FetchStream(broker_pb2_grpc.BrokerStub(channel))
        got = [(await stream.fetch(request(n), 5)).session_id for n in (1, 2, 3)]
        stream.close()
        return got, leader.streams

    assert with_leader(body) == ([1, 2, 3], 1)


@pytest.mark.parametrize(
    ("session", "reason"), [(HANG, "DEADLINE_EXCEEDED"), (END, "STREAM_ENDED")]
)
def test_a_fetch_without_an_answer_fails_and_the_next_opens_a_new_stream(
    session: int, reason: str
) -> None:
    async def body(leader: _Leader, channel: grpc.aio.Channel) -> tuple[str, int, int]:
        stream = FetchStream(broker_pb2_grpc.BrokerStub(channel))
        await stream.fetch(request(1), 5)
        with pytest.raises(FetchStreamError) as failed:
            await stream.fetch(request(session), 0.5)
        answer = await stream.fetch(request(2), 5)
        stream.close()
        return failed.value.reason, answer.session_id, leader.streams

    assert with_leader(body) == (reason, 2, 2)


def test_a_message_that_does_not_parse_ends_the_stream_with_invalid_argument() -> None:
    async def body(leader: _Leader, channel: grpc.aio.Channel) -> tuple[int, grpc.StatusCode]:
        call = channel.stream_stream("/minibroker.v1.Broker/FetchStream")()
        await call.write(request(5).SerializeToString())
        first = broker_pb2.FetchResponse.FromString(await call.read())
        await call.write(b"\xff\xff\xff\xff\xff")
        with pytest.raises(grpc.aio.AioRpcError) as ended:
            await call.read()
        return first.session_id, ended.value.code()

    assert with_leader(body) == (5, grpc.StatusCode.INVALID_ARGUMENT)
