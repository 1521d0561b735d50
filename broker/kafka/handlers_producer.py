"""InitProducerId on the Kafka listener: a new producer id for an idempotent producer, as
Kafka 2.6 gives one to every request without a transactional id (epoch 0).

What is not supported, exactly: transactions (a request with a transactional id is answered
INVALID_REQUEST: no transaction coordinator), and the broker does not yet check the sequence
numbers of an idempotent producer's batches: a batch the producer retries after a lost answer
can be appended twice, as with enable.idempotence=false. Nothing acknowledged is lost."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer.transaction import InitProducerIdResponse

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode


async def handle_init_producer_id(ctx: KafkaContext, request: Any, version: int) -> Any:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), producer_id=-1,
            producer_epoch=-1,
        )  # fmt: skip
    producer_id = await ctx.producer_ids.next_producer_id()
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0
    )
