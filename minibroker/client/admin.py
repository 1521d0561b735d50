"""Admin calls to a broker over gRPC. Returns dataclasses; no _pb2 object leaves this module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.wire import error_from_wire


class BrokerUnreachable(RuntimeError):
    pass


@dataclass(frozen=True)
class RemoteReplicaDescription:
    """The leader's view of one follower: its LEO as of its latest fetch (-1 before any)."""

    broker_id: int
    log_end_offset: int
    last_caught_up_ms_ago: int


@dataclass(frozen=True)
class ReplicaDescription:
    """One partition as the broker hosting it reports it: its own log and high watermark,
    and on the leader the ISR and the followers' fetch state."""

    tp: TopicPartition
    is_leader: bool
    leader: int
    leader_epoch: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    isr: tuple[int, ...]
    remote_replicas: tuple[RemoteReplicaDescription, ...]

    def remote(self, broker_id: int) -> RemoteReplicaDescription | None:
        return next((r for r in self.remote_replicas if r.broker_id == broker_id), None)


@dataclass(frozen=True)
class BrokerDescription:
    broker_id: int
    broker_epoch: int
    zookeeper_connect: str
    profile: str
    config: dict[str, str]
    partitions: dict[TopicPartition, ReplicaDescription]


def describe_broker(address: str, timeout_s: float = 5.0) -> BrokerDescription:
    """Ask the broker at host:port who it is, which ZooKeeper it uses and what it hosts."""
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
    replicas = [_replica(p) for p in resp.partitions]
    return BrokerDescription(
        broker_id=resp.broker_id,
        broker_epoch=resp.broker_epoch,
        zookeeper_connect=resp.zookeeper_connect,
        profile=resp.profile,
        config=dict(resp.config),
        partitions={r.tp: r for r in replicas},
    )


def _replica(p: Any) -> ReplicaDescription:
    return ReplicaDescription(
        tp=TopicPartition(p.topic, p.partition),
        is_leader=p.is_leader,
        leader=p.leader,
        leader_epoch=p.leader_epoch,
        log_start_offset=p.log_start_offset,
        log_end_offset=p.log_end_offset,
        high_watermark=p.high_watermark,
        isr=tuple(p.isr),
        remote_replicas=tuple(
            RemoteReplicaDescription(r.broker_id, r.log_end_offset, r.last_caught_up_ms_ago)
            for r in p.remote_replicas
        ),
    )
