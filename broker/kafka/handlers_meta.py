"""ApiVersions and Metadata on the Kafka listener (Kafka 2.6's answers)."""

from __future__ import annotations

from typing import Any

from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata.api_versions import ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataResponse

from broker import auto_create
from broker.kafka.authz import topics_allowed
from broker.kafka.context import KafkaContext
from broker.kafka.protocol import APIS
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation
from minibroker.core.types import INTERNAL_TOPICS, NO_LEADER

_Version = ApiVersionsResponse.ApiVersion
_Broker = MetadataResponse.MetadataResponseBroker
_Topic = MetadataResponse.MetadataResponseTopic
_Partition = _Topic.MetadataResponsePartition


# EndTxn v2+ only with transaction.version 2, as Kafka 4.0 advertises v5 only once its
# transaction.version feature is finalized at 2: a Kafka 2.6-like broker offers 0-1.
END_TXN_V1 = 1


def api_versions(error: ErrorCode = ErrorCode.NONE, transaction_version: int = 1) -> Any:
    """Every API this listener serves and its versions. With UNSUPPORTED_VERSION it is the
    answer to an ApiVersions request of a version this broker does not know (sent as v0, so
    that any client can read it and ask again)."""

    def most(a: Any) -> int:
        if a.key == ApiKey.EndTxn and transaction_version < 2:
            return END_TXN_V1
        return int(a.max_version)

    return ApiVersionsResponse(
        error_code=int(error),
        api_keys=[
            _Version(api_key=int(a.key), min_version=a.min_version, max_version=most(a))
            for a in sorted(APIS.values(), key=lambda a: a.key)
        ],
        throttle_time_ms=0,
    )


async def handle_api_versions(ctx: KafkaContext, request: Any, version: int) -> Any:
    return api_versions(transaction_version=ctx.rm.settings.get_int("transaction.version"))


async def handle_metadata(ctx: KafkaContext, request: Any, version: int) -> Any:
    cache = ctx.rm.metadata
    brokers = []
    for b in cache.brokers.values():
        # A broker without this listener is left out, as Kafka does (KIP-103).
        ep = b.endpoint_for(ctx.listener)
        if ep is not None:
            brokers.append(_Broker(node_id=b.broker_id, host=ep.host, port=ep.port, rack=None))
    # v0 asks for every topic with an empty list; later versions with null.
    names = [t.name for t in request.topics] if request.topics else None
    # Before v4 every Metadata request may create topics (allow_auto_topic_creation is v4+).
    allowed = bool(request.allow_auto_topic_creation) if version >= 4 else True
    # DESCRIBE on each topic: a listing of all leaves the others out silently, a request
    # that names one is answered TOPIC_AUTHORIZATION_FAILED for it (KafkaApis).
    wanted = cache.topics() if names is None else names
    described = topics_allowed(ctx, AclOperation.DESCRIBE, wanted, log=names is not None)
    # The cache as the request found it: a topic created below is answered with its creation's
    # error and no partitions, as KafkaApis.getTopicMetadata answers it.
    by_topic = cache.partitions_by_topic(None if names is None else described)
    missing = [n for n in names or [] if n in described and n not in by_topic]
    creatable = set(missing)
    if missing and not ctx.may_cluster(AclOperation.CREATE, log=False):
        creatable = topics_allowed(ctx, AclOperation.CREATE, missing)
    created = await auto_create.maybe_create(ctx.rm, creatable, allowed)
    topics = []
    for name in wanted:
        if name not in described or (name in missing and name not in creatable):
            if names is not None:
                topics.append(_refused_topic(name))
            continue
        partitions = by_topic.get(name, [])
        topic_error = (
            ErrorCode.NONE
            if partitions
            else created.get(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        )
        topics.append(
            _Topic(
                error_code=int(topic_error),
                name=name,
                is_internal=name in INTERNAL_TOPICS,
                partitions=[
                    _Partition(
                        error_code=int(
                            ErrorCode.LEADER_NOT_AVAILABLE if s.leader == NO_LEADER else 0
                        ),
                        partition_index=tp.partition,
                        leader_id=s.leader,
                        leader_epoch=s.leader_epoch,
                        replica_nodes=list(s.replicas),
                        isr_nodes=list(s.isr),
                        offline_replicas=list(s.offline_replicas),
                    )
                    for tp, s in partitions
                ],
            )
        )
    return MetadataResponse(
        throttle_time_ms=0,
        brokers=brokers,
        cluster_id=ctx.cluster_id,
        controller_id=_admin_broker(ctx),
        topics=topics,
    )


def _refused_topic(name: str) -> Any:
    return _Topic(
        error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED), name=name, is_internal=False,
        partitions=[],
    )  # fmt: skip


def _admin_broker(ctx: KafkaContext) -> int:
    """Kafka clients send admin requests to the "controller" a Metadata answer names. The
    controller of minibroker is no broker and speaks no Kafka protocol: the answer names the
    lowest live broker with this listener, and every broker serves those requests."""
    ids = [b.broker_id for b in ctx.rm.metadata.brokers.values() if b.endpoint_for(ctx.listener)]
    return min(ids) if ids else -1
