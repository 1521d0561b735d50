"""What the Kafka handlers share to authorize a request's topics (KafkaApis' authorize and
filterByAuthorized): the topics of a request a principal may act on, and what Produce must
know about its batches (idempotent records need IDEMPOTENT_WRITE on the Cluster, transactional
ones WRITE on their TransactionalId), read from the first batch's header without parsing."""

from __future__ import annotations

import struct
from collections.abc import Iterable

from broker.kafka.context import KafkaContext
from minibroker.core.security.acl import AclOperation, ResourceType

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
