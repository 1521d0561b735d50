"""What the Kafka handlers share to authorize a request's topics (KafkaApis' authorize and
filterByAuthorized): the topics of a request a principal may act on, the partitions of an
offset commit refused before the coordinator, and what Produce must know about its batches
(idempotent records need IDEMPOTENT_WRITE on the Cluster, transactional ones WRITE on their
TransactionalId), read from the first batch's header without parsing."""

from __future__ import annotations

import struct
from collections.abc import Collection, Iterable

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.types import TopicPartition

# RecordBatch v2: attributes (int16) at byte 21, producerId (int64) at byte 43.
_ATTRIBUTES = struct.Struct(">h")
_PRODUCER_ID = struct.Struct(">q")
TRANSACTIONAL_FLAG = 0x10


def batch_flags(records: bytes) -> tuple[bool, bool]:
    """(idempotent, transactional) of the first batch (False, False when too short to say:
    the append's own validation answers such bytes)."""
    if len(records) < 51:
        return False, False
    (attributes,) = _ATTRIBUTES.unpack_from(records, 21)
    (producer_id,) = _PRODUCER_ID.unpack_from(records, 43)
    return producer_id >= 0, bool(attributes & TRANSACTIONAL_FLAG)


def topics_allowed(
    ctx: KafkaContext, operation: AclOperation, topics: Iterable[str], *, log: bool = True
) -> set[str]:
    """The topics among `topics` the request's principal may do `operation` on."""
    return ctx.authorizer.allowed_names(
        ctx.session, operation, ResourceType.TOPIC, topics, log_denied=log
    )


def commit_refusals(
    tps: Iterable[TopicPartition], readable: Collection[str], known: Collection[TopicPartition]
) -> dict[TopicPartition, ErrorCode]:
    """The partitions of an offset commit that never reach the group coordinator (Kafka 2.6's
    KafkaApis.handleOffsetCommitRequest and handleTxnOffsetCommitRequest): a topic the
    principal may not READ is TOPIC_AUTHORIZATION_FAILED, a partition the metadata cache does
    not hold UNKNOWN_TOPIC_OR_PARTITION (an offset for a topic that does not exist is never
    stored)."""
    refused: dict[TopicPartition, ErrorCode] = {}
    for tp in tps:
        if tp.topic not in readable:
            refused[tp] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        elif tp not in known:
            refused[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    return refused
