"""The Broker service's answers built from results: a hosted partition's description for
`topics describe`, Produce answers, and fetches refused by authorization."""

from __future__ import annotations

from typing import Any

from broker.partition_table import HostedPartition
from minibroker.core.errors import ErrorCode
from minibroker.core.types import NO_LEADER, TopicPartition
from minibroker.rpc import broker_pb2
from minibroker.runtime.wire import error_to_wire


def replica_description(
    tp: TopicPartition, hosted: HostedPartition, now_ms: int
) -> broker_pb2.ReplicaDescription:
    """This broker's view of one hosted partition, for `minibroker topics describe`."""
    p, log = hosted.partition, hosted.log
    # A follower keeps RemoteReplica entries too, but only the leader's are fed by fetches.
    remotes = sorted(p.remote.values(), key=lambda r: r.broker_id) if p.is_leader else []
    txns: dict[str, Any] = {}
    if p.is_leader:
        txns["last_stable_offset"] = log.last_stable_offset(p.high_watermark)
        txns["open_transactions"] = [
            broker_pb2.OpenTransaction(
                producer_id=pid, first_offset=first,
                last_timestamp=log.producer_last_timestamp(pid),
            )
            for pid, first in sorted(log.open_transactions().items())
        ]  # fmt: skip
    return broker_pb2.ReplicaDescription(
        topic=tp.topic,
        partition=tp.partition,
        is_leader=p.is_leader,
        leader=p.leader_id if p.leader_id is not None else NO_LEADER,
        leader_epoch=p.leader_epoch,
        log_start_offset=log.log_start_offset,
        log_end_offset=log.log_end_offset,
        high_watermark=p.high_watermark,
        isr=sorted(p.isr),
        remote_replicas=[
            broker_pb2.RemoteReplicaDescription(
                broker_id=r.broker_id,
                log_end_offset=r.log_end_offset,
                # Kafka's 0 means "not since this broker became leader": said as -1.
                last_caught_up_ms_ago=(
                    max(0, now_ms - r.last_caught_up_time_ms) if r.last_caught_up_time_ms else -1
                ),
                log_start_offset=r.log_start_offset,
            )
            for r in remotes
        ],
        **txns,
    )


def produce_tps(request: Any) -> list[TopicPartition]:
    return [TopicPartition(t.name, p.partition_index) for t in request.topics for p in t.partitions]


def produce_response(
    results: dict[TopicPartition, tuple[ErrorCode, int, int, str]],
) -> broker_pb2.ProduceResponse:
    response = broker_pb2.ProduceResponse()
    by_topic: dict[str, Any] = {}
    for tp, (error, base_offset, log_start, message) in results.items():
        topic = by_topic.get(tp.topic)
        if topic is None:
            topic = by_topic[tp.topic] = response.responses.add(name=tp.topic)
        topic.partitions.add(
            partition_index=tp.partition,
            error_code=error_to_wire(error),
            base_offset=base_offset,
            log_append_time_ms=-1,
            log_start_offset=log_start,
            error_message=message,
        )
    return response


def fetch_refusal(request: Any, refused: set[str]) -> broker_pb2.FetchResponse:
    """The whole fetch refused, partition by partition (nothing read: a session is untouched;
    the caller sees which topics it may not read)."""
    response = broker_pb2.FetchResponse(session_id=int(request.session_id))
    for t in request.topics:
        topic = response.responses.add(topic=t.topic)
        for p in t.partitions:
            topic.partitions.add(
                partition_index=p.partition,
                error_code=error_to_wire(
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED if t.topic in refused else ErrorCode.NONE
                ),
                high_watermark=-1, last_stable_offset=-1, log_start_offset=-1,
                preferred_read_replica=-1,
            )  # fmt: skip
    return response


def fetch_failed(code: ErrorCode) -> broker_pb2.FetchResponse:
    return broker_pb2.FetchResponse(error_code=error_to_wire(code))
