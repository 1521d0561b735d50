"""DeleteRecords from the client side (KIP-107), as Kafka's kafka-delete-records and
AdminClient.deleteRecords: the offsets in Kafka's `--offset-json-file` format, each partition's
request sent to its leader over gRPC, and per partition the low watermark reached or the error.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime.wire import error_from_wire

HIGH_WATERMARK = -1


@dataclass(frozen=True)
class DeletedRecords:
    tp: TopicPartition
    error: ErrorCode
    low_watermark: int = -1
    message: str = ""


def parse_offset_json(text: str) -> dict[TopicPartition, int]:
    """kafka-delete-records' file: {"partitions": [{"topic": T, "partition": P, "offset": O}],
    "version": 1}; ValueError saying what is wrong otherwise."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"the offset JSON does not parse: {exc}") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ValueError('the offset JSON needs a non-empty "partitions" list')
    out: dict[TopicPartition, int] = {}
    for entry in entries:
        try:
            tp = TopicPartition(str(entry["topic"]), int(entry["partition"]))
            offset = int(entry["offset"])
        except (KeyError, TypeError, ValueError):
            raise ValueError(
                f'each partition needs "topic", "partition" and "offset": got {entry!r}'
            ) from None
        if tp in out:
            raise ValueError(f"offset JSON names partition {tp} twice")
        out[tp] = offset
    return out


def delete_records(
    leaders: Mapping[TopicPartition, str | None],
    offsets: Mapping[TopicPartition, int],
    timeout_ms: int = 30_000,
) -> dict[TopicPartition, DeletedRecords]:
    """Send each partition's offset to its leader (`leaders`: its gRPC address, None when it
    has none) and wait for the answers."""
    by_leader: dict[str, dict[TopicPartition, int]] = {}
    out: dict[TopicPartition, DeletedRecords] = {}
    for tp, offset in offsets.items():
        address = leaders.get(tp)
        if address is None:
            out[tp] = DeletedRecords(tp, ErrorCode.LEADER_NOT_AVAILABLE, message="no leader")
            continue
        by_leader.setdefault(address, {})[tp] = offset
    for address, wanted in by_leader.items():
        out.update(_ask(address, wanted, timeout_ms))
    return out


def _ask(
    address: str, offsets: Mapping[TopicPartition, int], timeout_ms: int
) -> dict[TopicPartition, DeletedRecords]:
    request = broker_pb2.DeleteRecordsRequest(timeout_ms=timeout_ms)
    for topic in sorted({tp.topic for tp in offsets}):
        t = request.topics.add(name=topic)
        for tp, offset in sorted(offsets.items()):
            if tp.topic == topic:
                t.partitions.add(partition_index=tp.partition, offset=offset)
    with grpc_security.sync_channel(address) as channel:
        stub = broker_pb2_grpc.BrokerStub(channel)
        try:
            response = stub.DeleteRecords(request, timeout=timeout_ms / 1000 + 5)
        except grpc.RpcError as exc:
            reason = f"broker {address}: {exc.code().name}: {exc.details()}"
            return {tp: DeletedRecords(tp, ErrorCode.NETWORK_EXCEPTION, message=reason)
                    for tp in offsets}  # fmt: skip
    out = {}
    for t in response.topics:
        for p in t.partitions:
            tp = TopicPartition(t.name, p.partition_index)
            error = error_from_wire(p.error_code)
            out[tp] = DeletedRecords(tp, error, p.low_watermark, p.error_message)
    for tp in offsets:
        out.setdefault(tp, DeletedRecords(tp, ErrorCode.UNKNOWN_SERVER_ERROR, message="no answer"))
    return out
