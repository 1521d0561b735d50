"""A broker's description read again: replicas that read as before are the previous objects
(followers' time since they caught up compared in steps), so a caller polling every second
sees what changed by identity."""

from __future__ import annotations

from minibroker.client.admin import _description
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2


def response(leo: int, ago_ms: int) -> broker_pb2.DescribeBrokerResponse:
    return broker_pb2.DescribeBrokerResponse(
        broker_id=1,
        broker_epoch=7,
        partitions=[
            broker_pb2.ReplicaDescription(
                topic="t",
                partition=p,
                is_leader=True,
                leader=1,
                leader_epoch=2,
                log_end_offset=leo + p,
                high_watermark=leo,
                isr=[1, 2],
                remote_replicas=[
                    broker_pb2.RemoteReplicaDescription(
                        broker_id=2, log_end_offset=leo, last_caught_up_ms_ago=ago_ms
                    )
                ],
            )  # fmt: skip
            for p in (0, 1)
        ],
    )


def test_unchanged_replicas_are_the_previous_objects() -> None:
    first = _description("b1", response(10, 120))
    again = _description("b1", response(10, 480), first, 1000)  # same second
    t0, t1 = TopicPartition("t", 0), TopicPartition("t", 1)
    assert again.partitions[t0] is first.partitions[t0]
    assert again.partitions[t1] is first.partitions[t1]
    later = _description("b1", response(10, 1_200), again, 1000)
    assert later.partitions[t0] is not again.partitions[t0]
    assert later.partitions[t0].remote(2).last_caught_up_ms_ago == 1_200  # type: ignore[union-attr]
    moved = _description("b1", response(11, 1_200), later, 1000)
    assert moved.partitions[t1].log_end_offset == 12
    exact = _description("b1", response(11, 1_201), moved)  # no granularity: every ms counts
    assert exact.partitions[t0] is not moved.partitions[t0]
    assert exact.partitions == _description("b1", response(11, 1_201)).partitions
