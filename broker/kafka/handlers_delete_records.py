"""DeleteRecords (key 21, v0-2, KIP-107) on the Kafka listener: each partition's offset to the
leader's RecordDeletion (broker.delete_records), its low watermark or error back. A client
sends each partition to its leader (kafka-python's and confluent-kafka's admin clients do);
this broker answers NOT_LEADER_OR_FOLLOWER for the others, as Kafka."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.topics import DeleteRecordsResponse

from broker.delete_records import MAX_TIMEOUT_MS
from broker.kafka.authz import topics_allowed
from broker.kafka.context import KafkaContext
from minibroker.core.security.acl import AclOperation
from minibroker.core.types import TopicPartition

_Topic = DeleteRecordsResponse.DeleteRecordsTopicResult
_Partition = _Topic.DeleteRecordsPartitionResult


async def handle_delete_records(ctx: KafkaContext, request: Any, version: int) -> Any:
    offsets: dict[TopicPartition, int] = {}
    for t in request.topics:
        for p in t.partitions:
            offsets[TopicPartition(t.name, p.partition_index)] = int(p.offset)
    timeout_ms = max(0, min(int(request.timeout_ms), MAX_TIMEOUT_MS))
    deletable = topics_allowed(ctx, AclOperation.DELETE, {tp.topic for tp in offsets})
    results = await ctx.rm.deletion.delete_records(offsets, timeout_ms, deletable)
    by_topic: dict[str, list[Any]] = {}
    for tp, r in results.items():
        by_topic.setdefault(tp.topic, []).append(
            _Partition(
                partition_index=tp.partition,
                low_watermark=r.low_watermark,
                error_code=int(r.error),
            )  # fmt: skip
        )
    return DeleteRecordsResponse(
        throttle_time_ms=0,
        topics=[_Topic(name=name, partitions=parts) for name, parts in by_topic.items()],
    )
