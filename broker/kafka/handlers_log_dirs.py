"""DescribeLogDirs on the Kafka listener (Kafka 2.6's ReplicaManager.describeLogDirs): this
broker's one log dir, each hosted partition's size in bytes and its offset lag (max(HW - LEO, 0),
as Kafka reports a current log's). Admin clients ask each broker; watching a reassignment, the
new replica's size grows towards the others'."""

from __future__ import annotations

from typing import Any

from kafka.protocol.admin.cluster import DescribeLogDirsResponse

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation

_Result = DescribeLogDirsResponse.DescribeLogDirsResult
_Topic = _Result.DescribeLogDirsTopic
_Partition = _Topic.DescribeLogDirsPartition


async def handle_describe_log_dirs(ctx: KafkaContext, request: Any, version: int) -> Any:
    rm = ctx.rm
    if not ctx.may_cluster(AclOperation.DESCRIBE):  # KafkaApis: an empty answer, no error
        return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[])
    wanted = (
        None
        if request.topics is None
        else {(t.topic, p) for t in request.topics for p in t.partitions}
    )
    by_topic: dict[str, list[Any]] = {}
    for tp, hosted in sorted(rm.partitions.items()):
        if wanted is not None and (tp.topic, tp.partition) not in wanted:
            continue
        log = hosted.log
        lag = max(hosted.partition.high_watermark - log.log_end_offset, 0)
        by_topic.setdefault(tp.topic, []).append(
            _Partition(
                partition_index=tp.partition,
                partition_size=log.size_bytes,
                offset_lag=lag,
                is_future_key=False,
            )  # fmt: skip
        )
    result = _Result(
        error_code=int(ErrorCode.NONE), log_dir=str(rm.log_dir.resolve()),
        topics=[_Topic(name=n, partitions=ps) for n, ps in by_topic.items()],
        total_bytes=-1, usable_bytes=-1, is_cordoned=False,
    )  # fmt: skip
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=0, results=[result])
