"""ListOffsets through each partition's leader: earliest, latest (the HW for consumers) or by
timestamp, retrying leader moves and OFFSET_NOT_AVAILABLE until a deadline."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping

from minibroker.client.channels import ChannelPool, RpcFailure
from minibroker.client.errors import BrokerError, ClientError, UnknownTopicError
from minibroker.client.metadata import BrokerNode, MetadataClient
from minibroker.client.requests import list_offsets_request, list_offsets_results
from minibroker.core.errors import REFRESH_METADATA, RETRIABLE, ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.runtime.clock import monotonic_ms


async def list_offsets(
    metadata: MetadataClient,
    channels: ChannelPool,
    timestamps: Mapping[TopicPartition, int],
    *,
    timeout_ms: int,
    request_timeout_ms: int,
    retry_backoff_ms: int,
    isolation_level: int = 0,
) -> dict[TopicPartition, int]:
    """The offset for each partition's timestamp (-1 latest: the LSO with isolation level 1,
    read_committed; -2 earliest). Raises
    UnknownTopicError, a non-retriable BrokerError, or BrokerError after `timeout_ms`."""
    deadline = monotonic_ms() + timeout_ms
    await _check_partitions_exist(metadata, timestamps, timeout_ms)
    remaining = dict(timestamps)
    found: dict[TopicPartition, int] = {}
    last = ErrorCode.REQUEST_TIMED_OUT
    while True:
        by_leader: dict[BrokerNode, dict[TopicPartition, int]] = {}
        for tp, ts in remaining.items():
            leader = metadata.cache.leader_for(tp)
            if leader is not None:
                by_leader.setdefault(leader, {})[tp] = ts
        answers = await asyncio.gather(
            *(
                _ask(metadata, channels, node, ts, request_timeout_ms, isolation_level)
                for node, ts in by_leader.items()
            )
        )
        for answer in answers:
            for tp, (code, offset) in answer.items():
                if tp not in remaining:
                    continue
                if code is ErrorCode.NONE:
                    found[tp] = offset
                    del remaining[tp]
                    continue
                if code not in RETRIABLE:
                    raise BrokerError(code, f"ListOffsets for {tp}")
                if code in REFRESH_METADATA:
                    metadata.request_update(tp)
                last = code
        if not remaining:
            return found
        if monotonic_ms() >= deadline:
            names = ", ".join(sorted(map(str, remaining)))
            raise BrokerError(last, f"no offsets for {names} within {timeout_ms} ms")
        await asyncio.sleep(retry_backoff_ms / 1000)
        with contextlib.suppress(ClientError):
            await metadata.refresh()


async def _check_partitions_exist(
    metadata: MetadataClient, timestamps: Mapping[TopicPartition, int], timeout_ms: int
) -> None:
    for topic in sorted({tp.topic for tp in timestamps}):
        parts = await metadata.wait_for_topic(topic, timeout_ms)
        missing = sorted(tp.partition for tp in timestamps if tp.topic == topic)
        missing = [p for p in missing if p not in parts]
        if missing:
            raise UnknownTopicError(topic, f"topic {topic!r} has no partition {missing[0]}")


async def _ask(
    metadata: MetadataClient,
    channels: ChannelPool,
    node: BrokerNode,
    timestamps: Mapping[TopicPartition, int],
    request_timeout_ms: int,
    isolation_level: int = 0,
) -> dict[TopicPartition, tuple[ErrorCode, int]]:
    request = list_offsets_request(timestamps, metadata.cache.leader_epoch, isolation_level)
    try:
        resp = await channels.call(node.address, "ListOffsets", request, request_timeout_ms)
    except RpcFailure as exc:
        metadata.mark_failed(node.address)
        if not exc.retriable:
            raise
        return {tp: (ErrorCode.NETWORK_EXCEPTION, -1) for tp in timestamps}
    return list_offsets_results(resp)
