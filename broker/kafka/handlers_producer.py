"""InitProducerId on the Kafka listener: a new producer id for an idempotent producer, as
Kafka 2.6 gives one to every request without a transactional id (epoch 0; a v3 request naming
the producer's current id and epoch, KIP-360's bump, gets a new id too, as in Kafka 2.6).

The sequence numbers of an idempotent producer's batches are checked where they are appended
(broker/log/producer_state.py). Not supported: transactions (a request with a transactional id
is answered INVALID_REQUEST: there is no transaction coordinator)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.producer.transaction import InitProducerIdResponse

from broker.kafka.context import KafkaContext
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation


async def handle_init_producer_id(ctx: KafkaContext, request: Any, version: int) -> Any:
    if request.transactional_id is not None:
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.INVALID_REQUEST), producer_id=-1,
            producer_epoch=-1,
        )  # fmt: skip
    if not ctx.may_cluster(AclOperation.IDEMPOTENT_WRITE):  # KafkaApis: an idempotent producer
        return InitProducerIdResponse(
            throttle_time_ms=0, error_code=int(ErrorCode.CLUSTER_AUTHORIZATION_FAILED),
            producer_id=-1, producer_epoch=-1,
        )  # fmt: skip
    producer_id = await ctx.producer_ids.next_producer_id()
    return InitProducerIdResponse(
        throttle_time_ms=0, error_code=0, producer_id=producer_id, producer_epoch=0
    )
