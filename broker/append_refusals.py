"""What a refused append answers, in words a producer's log can show."""

from __future__ import annotations

from broker.replication.partition import Partition
from broker.types import ProduceResult
from minibroker.core.errors import ErrorCode

# Kafka's ReplicaManager.appendToLocalLog without internalTopicsAllowed.
INTERNAL_TOPIC_REFUSAL = ProduceResult(
    ErrorCode.INVALID_TOPIC_EXCEPTION, message="Cannot append to internal topic"
)


def append_refusal(error: ErrorCode, p: Partition) -> str:
    if error is ErrorCode.NOT_ENOUGH_REPLICAS:
        return (
            f"ISR {sorted(p.isr)} has fewer than min.insync.replicas={p.min_insync_replicas}; "
            "nothing was appended"
        )
    return ""
