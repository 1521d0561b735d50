"""The event buffer, the Events gRPC service (real gRPC on loopback) and the client's merge."""

from __future__ import annotations

import asyncio
import json
import threading

import grpc
import pytest

from minibroker.client.events import Follower, Source, TimeOrder, read_events
from minibroker.rpc import events_pb2, events_pb2_grpc
from minibroker.runtime import event_buffer
from minibroker.runtime.clock import now_ms
from minibroker.runtime.event_buffer import EventBuffer
from minibroker.runtime.event_service import EventsServicer


def line(ts: int, name: str, proc: str = "broker-1", **fields: object) -> str:
    return json.dumps({"ts": ts, "level": "INFO", "proc": proc, "event": name, **fields})


def test_buffer_numbers_events_and_filters_by_time_and_sequence() -> None:
    buf = EventBuffer(capacity=3)
    for i in range(1, 5):
        buf.add(100 * i, line(100 * i, f"e{i}"))
    kept = buf.snapshot()
    assert [e.seq for e in kept] == [2, 3, 4]  # capacity 3: the oldest went
    assert [e.seq for e in buf.snapshot(since_ms=300)] == [3, 4]
    assert [e.seq for e in buf.snapshot(after_seq=3)] == [4]


async def _test_follow_gets_the_backlog_then_new_events_from_any_thread() -> None:
    buf = EventBuffer()
    buf.add(1, line(1, "old"))
    backlog, follower = buf.follow(asyncio.get_running_loop())
    assert [e.seq for e in backlog] == [1]
    t = threading.Thread(target=buf.add, args=(2, line(2, "new")))
    t.start()
    t.join()
    got = await asyncio.wait_for(follower.queue.get(), 5)
    assert got is not None and got.seq == 2
    buf.unfollow(follower)
    buf.add(3, line(3, "unseen"))
    await asyncio.sleep(0)
    assert follower.queue.empty()


async def _test_a_follower_too_far_behind_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(event_buffer, "MAX_FOLLOWER_BACKLOG", 2)
    buf = EventBuffer()
    _, follower = buf.follow(asyncio.get_running_loop())
    for i in range(4):
        buf.add(i, line(i, "e"))
    await asyncio.sleep(0)  # one loop turn runs the callbacks the adds scheduled
    items = [follower.queue.get_nowait() for _ in range(follower.queue.qsize())]
    assert items[-1] is None and len(items) == 3  # two events, then the end marker


async def _test_routine_events_are_left_out_for_who_asks() -> None:
    buf = EventBuffer()
    buf.add(1, line(1, "hw_advanced", cause="append"), routine=True)
    buf.add(2, line(2, "isr_shrink"))
    assert [e.seq for e in buf.snapshot(skip_routine=True)] == [2]
    assert [e.seq for e in buf.snapshot()] == [1, 2]
    backlog, spared = buf.follow(asyncio.get_running_loop(), skip_routine=True)
    _, everything = buf.follow(asyncio.get_running_loop())
    assert [e.seq for e in backlog] == [2]
    buf.add(3, line(3, "hw_advanced", cause="follower_fetch"), routine=True)
    buf.add(4, line(4, "hw_advanced", cause="isr_shrink"))  # caused by an ISR change: story
    await asyncio.sleep(0)
    assert [spared.queue.get_nowait().seq for _ in range(spared.queue.qsize())] == [4]  # type: ignore[union-attr]
    assert [everything.queue.get_nowait().seq for _ in range(everything.queue.qsize())] == [3, 4]  # type: ignore[union-attr]
    server, address = await _serve(buf)
    try:
        got = await read_events(Source("broker-1", address), skip_routine=True)
        assert [e["ts"] for e in got] == [2, 4]
    finally:
        await server.stop(None)


def test_logged_routine_hw_moves_are_marked_in_the_buffer() -> None:
    import logging

    from minibroker.runtime import logging as mlogging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    mlogging.setup("broker-9")
    try:
        before = mlogging.event_buffer().snapshot()
        mlogging.event("hw_advanced", tp="t-0", high_watermark=5, cause="append")
        mlogging.event("hw_advanced", tp="t-0", high_watermark=6, cause="isr_shrink")
        mlogging.event("isr_shrink", tp="t-0")
        new = [e for e in mlogging.event_buffer().snapshot() if e not in before]
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    assert [(json.loads(e.json)["event"], e.routine) for e in new] == [
        ("hw_advanced", True),
        ("hw_advanced", False),
        ("isr_shrink", False),
    ]


def test_routine_events_are_left_out_for_who_asks() -> None:
    asyncio.run(_test_routine_events_are_left_out_for_who_asks())


async def _serve(buf: EventBuffer) -> tuple[grpc.aio.Server, str]:
    server = grpc.aio.server()
    events_pb2_grpc.add_EventsServicer_to_server(EventsServicer(buf), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, f"127.0.0.1:{port}"


async def _test_service_serves_kept_events_and_validates_the_request() -> None:
    buf = EventBuffer()
    buf.add(10, line(10, "a"))
    buf.add(20, line(20, "b", x=1))
    server, address = await _serve(buf)
    try:
        got = await read_events(Source("broker-1", address))
        assert [e["event"] for e in got] == ["a", "b"] and got[1]["x"] == 1
        assert [e["event"] for e in await read_events(Source("b", address), since_ms=15)] == ["b"]
        async with grpc.aio.insecure_channel(address) as ch:
            stub = events_pb2_grpc.EventsStub(ch)
            with pytest.raises(grpc.aio.AioRpcError) as err:
                async for _ in stub.Stream(events_pb2.StreamEventsRequest(since_ms=-1)):
                    pass
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "INVALID_REQUEST (42)" in (err.value.details() or "")
            # Resuming after seq 1 of this boot skips it; another boot id does not.
            req = events_pb2.StreamEventsRequest(after_boot_id=buf.boot_id, after_seq=1)
            assert [r.seq async for r in stub.Stream(req)] == [2]
            req = events_pb2.StreamEventsRequest(after_boot_id="other", after_seq=1)
            assert [r.seq async for r in stub.Stream(req)] == [1, 2]
    finally:
        await server.stop(None)


async def _test_follower_merges_live_sources_in_time_order() -> None:
    one, two = EventBuffer(), EventBuffer()
    server1, addr1 = await _serve(one)
    server2, addr2 = await _serve(two)
    got: list[str] = []
    status: list[str] = []
    sources = [Source("broker-1", addr1), Source("broker-2", addr2)]

    async def discover() -> list[Source]:
        return sources

    follower = Follower(discover, lambda e: got.append(e["event"]), status.append, hold_ms=200)
    stop = asyncio.Event()
    task = asyncio.ensure_future(follower.run(stop))
    try:
        deadline = asyncio.get_running_loop().time() + 10
        while sum("following" in s for s in status) < 2:
            assert asyncio.get_running_loop().time() < deadline, status
            await asyncio.sleep(0.05)
        t = now_ms()
        two.add(t + 5, line(t + 5, "second", "broker-2"))
        one.add(t, line(t, "first"))
        one.add(t + 10, line(t + 10, "third"))
        while len(got) < 3:
            assert asyncio.get_running_loop().time() < deadline, got
            await asyncio.sleep(0.05)
        assert got == ["first", "second", "third"]
    finally:
        stop.set()
        await task
        await server1.stop(None)
        await server2.stop(None)


def test_time_order_holds_events_until_they_are_old_enough() -> None:
    order = TimeOrder(hold_ms=100)
    order.push({"ts": 50, "event": "b"})
    order.push({"ts": 10, "event": "a"})
    assert order.ready(100) == []
    assert [e["event"] for e in order.ready(151)] == ["a", "b"]
    order.push({"ts": 500, "event": "c"})
    assert [e["event"] for e in order.drain()] == ["c"]


def test_follow_gets_the_backlog_then_new_events_from_any_thread() -> None:
    asyncio.run(_test_follow_gets_the_backlog_then_new_events_from_any_thread())


def test_a_follower_too_far_behind_is_cut_off(monkeypatch: pytest.MonkeyPatch) -> None:
    asyncio.run(_test_a_follower_too_far_behind_is_cut_off(monkeypatch))


def test_service_serves_kept_events_and_validates_the_request() -> None:
    asyncio.run(_test_service_serves_kept_events_and_validates_the_request())


def test_follower_merges_live_sources_in_time_order() -> None:
    asyncio.run(_test_follower_merges_live_sources_in_time_order())
