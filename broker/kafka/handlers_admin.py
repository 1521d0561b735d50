"""CreateTopics, DeleteTopics and CreatePartitions on the Kafka listener, as Kafka 2.6's
AdminManager answers them (`kafka/server/AdminManager.scala`). Any broker answers them: a
Metadata answer names a broker as the "controller" (minibroker's controller is not a broker and
speaks no Kafka protocol), and these requests only write ZooKeeper as Kafka's AdminZkClient
does; the controller does the rest. Each waits, up to the request's timeout, until this broker's
metadata shows the change (Kafka's DelayedCreatePartitions and DelayedDeleteTopics):
every partition led, or the topic gone."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from kafka.protocol.admin.topics import (
    CreatePartitionsResponse,
    CreateTopicsResponse,
    DeleteTopicsResponse,
)

from broker.kafka.context import KafkaContext
from minibroker.client import admin_zk, topic_changes_zk
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.types import NO_LEADER
from minibroker.runtime.zk_errors import ZkError

_rng = random.Random()  # where a topic's leaders start: Kafka draws at random too

_Created = CreateTopicsResponse.CreatableTopicResult
_Deleted = DeleteTopicsResponse.DeletableTopicResult
_Grown = CreatePartitionsResponse.CreatePartitionsTopicResult
Outcome = tuple[ErrorCode, str | None]


# ---- CreateTopics -------------------------------------------------------------------------------


async def handle_create_topics(ctx: KafkaContext, request: Any, version: int) -> Any:
    validate_only = bool(request.validate_only) if version >= 1 else False
    results = []
    # KafkaApis: CREATE on the Cluster covers every topic, else CREATE on each.
    any_topic = ctx.may_cluster(AclOperation.CREATE, log=False)
    for t in request.topics:
        if any_topic or ctx.may(AclOperation.CREATE, ResourceType.TOPIC, t.name):
            error, message = await create_topic(ctx, t, validate_only, int(request.timeout_ms))
        else:
            error, message = ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
        results.append(
            _Created(
                name=t.name,
                error_code=int(error),
                error_message=message,
                num_partitions=t.num_partitions,
                replication_factor=t.replication_factor,
                configs=None,
            )  # fmt: skip
        )
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


async def create_topic(ctx: KafkaContext, t: Any, validate_only: bool, timeout_ms: int) -> Outcome:
    """One topic of a CreateTopics request (AdminManager.createTopics)."""
    settings = ctx.rm.settings
    partitions, replication = int(t.num_partitions), int(t.replication_factor)
    explicit = {int(a.partition_index): tuple(a.broker_ids) for a in t.assignments or []}
    if explicit and (partitions != -1 or replication != -1):
        return ErrorCode.INVALID_REQUEST, (
            "Both numPartitions or replicationFactor and replicasAssignments were set. "
            "Both cannot be used at the same time."
        )
    if t.name in ctx.rm.metadata.topics():
        return ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{t.name}' already exists."
    nulls = [c.name for c in t.configs or [] if c.value is None]
    if nulls:
        return ErrorCode.INVALID_REQUEST, (
            f"Null value not supported for topic configs : {','.join(nulls)}"
        )
    if partitions == -1:
        partitions = settings.get_int("num.partitions")
    if replication == -1:
        replication = settings.get_int("default.replication.factor")
    config = {c.name: c.value for c in t.configs or []}
    try:
        created = await asyncio.to_thread(
            admin_zk.create_topic, ctx.rm.store, t.name, partitions, replication, config, _rng,
            validate_only=validate_only, replica_assignment=explicit or None,
        )  # fmt: skip
    except ApiError as exc:
        return exc.code, exc.message
    except ZkError as exc:
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
    if validate_only:
        return ErrorCode.NONE, None
    if timeout_ms <= 0 or not await wait_for_leaders(
        ctx, t.name, len(created.partitions), timeout_ms
    ):
        return ErrorCode.REQUEST_TIMED_OUT, "created; not every partition has a leader yet"
    return ErrorCode.NONE, None


async def wait_for_leaders(ctx: KafkaContext, topic: str, partitions: int, timeout_ms: int) -> bool:
    """Until this broker's metadata has `partitions` partitions of `topic`, each led."""

    def led() -> bool:
        states = ctx.rm.metadata.partitions_of(topic)
        return len(states) >= partitions and all(s.leader != NO_LEADER for _, s in states)

    return await ctx.rm.metadata.wait_for(led, timeout_ms / 1000)


# ---- DeleteTopics ---------------------------------------------------------------------------


async def handle_delete_topics(ctx: KafkaContext, request: Any, version: int) -> Any:
    names = list(request.topic_names or [t.name for t in request.topics or []])
    outcomes: dict[str, Outcome] = {}
    if not ctx.rm.settings.get_bool("delete.topic.enable"):
        code = ErrorCode.TOPIC_DELETION_DISABLED if version >= 3 else ErrorCode.INVALID_REQUEST
        outcomes = {n: (code, "delete.topic.enable is false on this cluster") for n in names}
    else:
        for name in names:
            if ctx.may(AclOperation.DELETE, ResourceType.TOPIC, name):
                outcomes[name] = await _mark(ctx, name)
            else:
                outcomes[name] = (ErrorCode.TOPIC_AUTHORIZATION_FAILED, None)
        marked = [n for n, (e, _) in outcomes.items() if e is ErrorCode.NONE]
        timeout_ms = int(request.timeout_ms)
        # DelayedDeleteTopics: done once no marked topic is in this broker's metadata.
        gone = timeout_ms > 0 and await ctx.rm.metadata.wait_for(
            lambda: not set(marked) & set(ctx.rm.metadata.topics()), timeout_ms / 1000
        )
        for n in marked:
            if not gone and n in ctx.rm.metadata.topics():
                outcomes[n] = (ErrorCode.REQUEST_TIMED_OUT, "marked for deletion; not gone yet")
    results = [
        _Deleted(name=n, error_code=int(e), error_message=m) for n, (e, m) in outcomes.items()
    ]
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def _mark(ctx: KafkaContext, name: str) -> Outcome:
    if name not in ctx.rm.metadata.topics():
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic"
    try:
        await asyncio.to_thread(topic_changes_zk.mark_for_deletion, ctx.rm.store, name)
    except ApiError as exc:
        return exc.code, exc.message
    except ZkError as exc:
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
    return ErrorCode.NONE, None


# ---- CreatePartitions (KIP-195) ----------------------------------------------------------------


async def handle_create_partitions(ctx: KafkaContext, request: Any, version: int) -> Any:
    validate_only = bool(request.validate_only)
    timeout_ms = int(request.timeout_ms)
    results = []
    for t in request.topics:
        given = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        if not ctx.may(AclOperation.ALTER, ResourceType.TOPIC, t.name):
            results.append(
                _Grown(
                    name=t.name,
                    error_code=int(ErrorCode.TOPIC_AUTHORIZATION_FAILED),
                    error_message="The topic authorization is failed.",
                )  # fmt: skip
            )
            continue
        try:
            await asyncio.to_thread(
                topic_changes_zk.add_partitions, ctx.rm.store, t.name, int(t.count), given,
                validate_only=validate_only,
            )  # fmt: skip
            error, message = ErrorCode.NONE, None
            if not validate_only and (
                timeout_ms <= 0 or not await wait_for_leaders(ctx, t.name, int(t.count), timeout_ms)
            ):
                error, message = ErrorCode.REQUEST_TIMED_OUT, "not every partition is led yet"
        except ApiError as exc:
            error, message = exc.code, exc.message
        except ZkError as exc:
            error, message = ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
        results.append(_Grown(name=t.name, error_code=int(error), error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)
