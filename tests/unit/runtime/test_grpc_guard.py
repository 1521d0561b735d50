"""The request guard on a real in-process gRPC server: undecodable bytes are INVALID_ARGUMENT,
an escaped exception INTERNAL (with a request_failed event), an unimplemented method
UNIMPLEMENTED, and each server keeps its own handlers."""

from __future__ import annotations

import asyncio
from typing import Any

import grpc
import pytest

from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.grpc_guard import RequestGuard


class _Servicer(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    def __init__(self, name: str) -> None:
        self.name = name

    async def Metadata(self, request: Any, context: Any) -> broker_pb2.MetadataResponse:  # noqa: N802
        return broker_pb2.MetadataResponse(cluster_id=self.name)

    async def Produce(self, request: Any, context: Any) -> broker_pb2.ProduceResponse:  # noqa: N802
        raise RuntimeError("a bug")


async def _call(port: int, method: str, payload: bytes) -> tuple[grpc.StatusCode, bytes]:
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            out = await channel.unary_unary(f"/minibroker.v1.Broker/{method}")(payload, timeout=5)
        except grpc.aio.AioRpcError as exc:
            return exc.code(), (exc.details() or "").encode()
        return grpc.StatusCode.OK, out


async def _scenario() -> dict[str, tuple[grpc.StatusCode, bytes]]:
    servers, ports = [], []
    for name in ("first", "second"):
        server = grpc.aio.server(interceptors=[RequestGuard()])
        broker_pb2_grpc.add_BrokerServicer_to_server(_Servicer(name), server)
        ports.append(server.add_insecure_port("127.0.0.1:0"))
        await server.start()
        servers.append(server)
    try:
        ok = broker_pb2.MetadataRequest().SerializeToString()
        return {
            "metadata-first": await _call(ports[0], "Metadata", ok),
            "metadata-second": await _call(ports[1], "Metadata", ok),
            "garbage": await _call(ports[0], "Metadata", b"\xff\xff\xff\xff\xff"),
            "raises": await _call(ports[0], "Produce", b""),
            "unimplemented": await _call(ports[0], "Fetch", b""),
        }
    finally:
        await asyncio.gather(*(s.stop(None) for s in servers))


def test_the_guard_answers_every_kind_of_bad_request_with_a_defined_status(
    caplog: pytest.LogCaptureFixture,
) -> None:
    got = asyncio.run(_scenario())
    first = broker_pb2.MetadataResponse.FromString(got["metadata-first"][1])
    second = broker_pb2.MetadataResponse.FromString(got["metadata-second"][1])
    assert (first.cluster_id, second.cluster_id) == ("first", "second")
    assert got["garbage"][0] is grpc.StatusCode.INVALID_ARGUMENT
    assert b"does not parse" in got["garbage"][1]
    assert got["raises"][0] is grpc.StatusCode.INTERNAL
    assert b"RuntimeError" in got["raises"][1]
    assert got["unimplemented"][0] is grpc.StatusCode.UNIMPLEMENTED
    assert [r.getMessage() for r in caplog.records] == ["request_failed"]
