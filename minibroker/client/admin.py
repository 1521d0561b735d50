"""Admin calls to a broker over gRPC. Returns dataclasses; no _pb2 object leaves this module."""

from __future__ import annotations

from dataclasses import dataclass

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.wire import error_from_wire


class BrokerUnreachable(RuntimeError):
    pass


@dataclass(frozen=True)
class BrokerDescription:
    broker_id: int
    broker_epoch: int
    zookeeper_connect: str
    profile: str
    config: dict[str, str]


def describe_broker(address: str, timeout_s: float = 5.0) -> BrokerDescription:
    """Ask the broker at host:port who it is and which ZooKeeper it uses."""
    with grpc.insecure_channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        try:
            resp = stub.DescribeBroker(broker_pb2.DescribeBrokerRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            raise BrokerUnreachable(
                f"broker {address}: {exc.code().name}: {exc.details()}"
            ) from None
    error = error_from_wire(resp.error_code)
    if error is not ErrorCode.NONE:
        raise BrokerUnreachable(f"broker {address} answered {error.name}")
    return BrokerDescription(
        broker_id=resp.broker_id,
        broker_epoch=resp.broker_epoch,
        zookeeper_connect=resp.zookeeper_connect,
        profile=resp.profile,
        config=dict(resp.config),
    )
