"""Admin calls to a broker over gRPC. Returns dataclasses; no _pb2 object leaves this module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import grpc

from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime import grpc_security
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
    # The leader's last stable offset and open transactions (producer id, first offset, the
    # producer's latest batch timestamp there).
    last_stable_offset: int | None = None
    open_transactions: tuple[tuple[int, int, int], ...] = ()

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
    static_config_names: frozenset[str] = frozenset()
    dynamic_default_config: dict[str, str] | None = None
    dynamic_broker_config: dict[str, str] | None = None
    leader_replication_byte_rate: float = 0.0
    follower_replication_byte_rate: float = 0.0


def describe_broker(address: str, timeout_s: float = 5.0) -> BrokerDescription:
    """Ask the broker at host:port who it is, which ZooKeeper it uses and what it hosts."""
    with grpc_security.sync_channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        try:
            resp = stub.DescribeBroker(broker_pb2.DescribeBrokerRequest(), timeout=timeout_s)
        except grpc.RpcError as exc:
            raise BrokerUnreachable(
                f"broker {address}: {exc.code().name}: {exc.details()}"
            ) from None
    return _description(address, resp)


async def describe_broker_async(
    pool: ChannelPool,
    address: str,
    timeout_s: float = 5.0,
    previous: BrokerDescription | None = None,
    caught_up_granularity_ms: int = 1,
) -> BrokerDescription:
    """describe_broker over `pool`'s long-lived channel, for callers that ask every second:
    a replica that reads as it did in `previous` is `previous`'s object (followers'
    last_caught_up_ms_ago compared in steps of `caught_up_granularity_ms`), so callers see what
    changed by identity and a quiet broker costs no new objects."""
    try:
        resp = await pool.call(
            address, "DescribeBroker", broker_pb2.DescribeBrokerRequest(), int(timeout_s * 1000)
        )
    except RpcFailure as exc:
        raise BrokerUnreachable(str(exc)) from None
    return _description(address, resp, previous, caught_up_granularity_ms)


def _description(
    address: str, resp: Any, previous: BrokerDescription | None = None, granularity_ms: int = 1
) -> BrokerDescription:
    error = error_from_wire(resp.error_code)
    if error is not ErrorCode.NONE:
        raise BrokerUnreachable(f"broker {address} answered {error.name}")
    known = previous.partitions if previous is not None else {}
    replicas = []
    for p in resp.partitions:
        prev = known.get(TopicPartition(p.topic, p.partition))
        replicas.append(prev if prev and _unchanged(prev, p, granularity_ms) else _replica(p))
    return BrokerDescription(
        broker_id=resp.broker_id,
        broker_epoch=resp.broker_epoch,
        zookeeper_connect=resp.zookeeper_connect,
        profile=resp.profile,
        config=dict(resp.config),
        partitions={r.tp: r for r in replicas},
        static_config_names=frozenset(resp.static_config_names),
        dynamic_default_config=dict(resp.dynamic_default_config),
        dynamic_broker_config=dict(resp.dynamic_broker_config),
        leader_replication_byte_rate=resp.leader_replication_byte_rate,
        follower_replication_byte_rate=resp.follower_replication_byte_rate,
    )


def _unchanged(prev: ReplicaDescription, p: Any, granularity_ms: int) -> bool:
    if (
        prev.log_end_offset != p.log_end_offset
        or prev.high_watermark != p.high_watermark
        or prev.is_leader != p.is_leader
        or prev.leader_epoch != p.leader_epoch
        or prev.leader != p.leader
        or prev.log_start_offset != p.log_start_offset
        or prev.isr != tuple(p.isr)
        or prev.last_stable_offset != _replica(p).last_stable_offset
        or prev.open_transactions != _replica(p).open_transactions
        or len(prev.remote_replicas) != len(p.remote_replicas)
    ):
        return False
    return all(
        a.broker_id == b.broker_id
        and a.log_end_offset == b.log_end_offset
        and a.last_caught_up_ms_ago // granularity_ms == b.last_caught_up_ms_ago // granularity_ms
        for a, b in zip(prev.remote_replicas, p.remote_replicas, strict=True)
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
        last_stable_offset=p.last_stable_offset if p.HasField("last_stable_offset") else None,
        open_transactions=tuple(
            (t.producer_id, t.first_offset, t.last_timestamp) for t in p.open_transactions
        ),
    )
