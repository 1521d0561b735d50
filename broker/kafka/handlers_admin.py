"""CreateTopics, DeleteTopics and DescribeConfigs on the Kafka listener, as far as the clients'
admin APIs need them. Any broker answers them (a Metadata answer names a broker as the
"controller": minibroker's controller is not a broker and speaks no Kafka protocol).

CreateTopics writes the topic to ZooKeeper as `minibroker topics create` does (the controller
does the rest) and waits, up to the request's timeout, for every partition to have a leader in
this broker's metadata. Replica assignments given by the client are not supported (refused
with INVALID_REQUEST). DeleteTopics is answered TOPIC_DELETION_DISABLED: minibroker's
controller does not delete topics."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from kafka.protocol.admin.configs import DescribeConfigsResponse
from kafka.protocol.admin.topics import CreateTopicsResponse, DeleteTopicsResponse

from broker.kafka.context import KafkaContext
from minibroker.client import admin_zk
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.topic_config import TOPIC_CONFIG_CHECKS
from minibroker.core.types import NO_LEADER
from minibroker.runtime.zk_errors import ZkError

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
# DescribeConfigs' config sources (Kafka's ConfigSource).
TOPIC_CONFIG_SOURCE = 1
STATIC_BROKER_CONFIG_SOURCE = 4
DEFAULT_CONFIG_SOURCE = 5
# A topic key's broker-wide setting (Kafka's LogConfig synonyms) and Kafka's own default.
TOPIC_DEFAULTS: dict[str, tuple[str, str]] = {
    "min.insync.replicas": ("min.insync.replicas", "1"),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", "false"),
    "segment.bytes": ("log.segment.bytes", "1073741824"),
    "retention.ms": ("log.retention.ms", "604800000"),
    "cleanup.policy": ("log.cleanup.policy", "delete"),
}
WAIT_STEP_S = 0.05
_rng = random.Random()  # where a topic's leaders start: Kafka draws at random too

_Created = CreateTopicsResponse.CreatableTopicResult
_Deleted = DeleteTopicsResponse.DeletableTopicResult
_Described = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Described.DescribeConfigsResourceResult


async def handle_create_topics(ctx: KafkaContext, request: Any, version: int) -> Any:
    validate_only = bool(request.validate_only) if version >= 1 else False
    results = []
    for t in request.topics:
        error, message = await _create(ctx, t, validate_only, int(request.timeout_ms))
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


async def _create(
    ctx: KafkaContext, t: Any, validate_only: bool, timeout_ms: int
) -> tuple[ErrorCode, str | None]:
    settings = ctx.rm.settings
    partitions = int(t.num_partitions)
    replication = int(t.replication_factor)
    if partitions == -1:
        partitions = settings.get_int("num.partitions")
    if replication == -1:
        replication = settings.get_int("default.replication.factor")
    if partitions <= 0:
        return ErrorCode.INVALID_PARTITIONS, "the number of partitions must be at least 1"
    if replication <= 0:
        return ErrorCode.INVALID_REPLICATION_FACTOR, "the replication factor must be at least 1"
    if t.assignments:
        return ErrorCode.INVALID_REQUEST, "replica assignments are not supported; give counts"
    config = {c.name: c.value for c in t.configs or [] if c.value is not None}
    try:
        await asyncio.to_thread(
            admin_zk.create_topic, ctx.rm.store, t.name, partitions, replication, config, _rng,
            validate_only=validate_only,
        )  # fmt: skip
    except ApiError as exc:
        return exc.code, exc.message
    except ZkError as exc:
        return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
    if validate_only or timeout_ms <= 0:
        return ErrorCode.NONE, None
    if not await _wait_for_leaders(ctx, t.name, partitions, timeout_ms):
        return ErrorCode.REQUEST_TIMED_OUT, "created; not every partition has a leader yet"
    return ErrorCode.NONE, None


async def _wait_for_leaders(
    ctx: KafkaContext, topic: str, partitions: int, timeout_ms: int
) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_ms / 1000
    while True:
        states = ctx.rm.metadata.partitions_of(topic)
        if len(states) == partitions and all(s.leader != NO_LEADER for _, s in states):
            return True
        if loop.time() >= deadline:
            return False
        await asyncio.sleep(WAIT_STEP_S)  # polling this broker's metadata cache, not a sleep-wait


async def handle_delete_topics(ctx: KafkaContext, request: Any, version: int) -> Any:
    known = set(ctx.rm.metadata.topics())
    results = []
    for name in request.topic_names:
        error = (
            ErrorCode.TOPIC_DELETION_DISABLED
            if name in known
            else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )
        results.append(_Deleted(name=name, error_code=int(error), error_message=error.name))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


async def handle_describe_configs(ctx: KafkaContext, request: Any, version: int) -> Any:
    results = []
    for r in request.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        error, entries = ErrorCode.NONE, []
        if r.resource_type == TOPIC_RESOURCE:
            if r.resource_name not in ctx.rm.metadata.topics():
                error = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            else:
                try:
                    overrides = await asyncio.to_thread(
                        admin_zk.read_topic_config, ctx.rm.store, r.resource_name
                    )
                except ZkError:
                    overrides, error = {}, ErrorCode.UNKNOWN_SERVER_ERROR
                entries = _topic_entries(ctx, overrides)
        elif r.resource_type == BROKER_RESOURCE and r.resource_name in ("", str(ctx.rm.broker_id)):
            entries = [
                _entry(k, v, STATIC_BROKER_CONFIG_SOURCE, read_only=True)
                for k, v in sorted(ctx.rm.settings.as_strings().items())
            ]
        else:
            error = ErrorCode.INVALID_REQUEST
        results.append(
            _Described(
                error_code=int(error),
                error_message=None if error is ErrorCode.NONE else error.name,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[e for e in entries if keys is None or e.name in keys],
            )
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _topic_entries(ctx: KafkaContext, overrides: dict[str, str]) -> list[Any]:
    settings = ctx.rm.settings.as_strings()
    out = []
    for key in sorted(TOPIC_CONFIG_CHECKS):
        if key in overrides:
            out.append(_entry(key, overrides[key], TOPIC_CONFIG_SOURCE, read_only=False))
            continue
        broker_key, kafka_default = TOPIC_DEFAULTS.get(key, (key, ""))
        if broker_key in settings:
            out.append(_entry(key, settings[broker_key], STATIC_BROKER_CONFIG_SOURCE, False))
        else:
            out.append(_entry(key, kafka_default, DEFAULT_CONFIG_SOURCE, read_only=False))
    return out


def _entry(name: str, value: str, source: int, read_only: bool) -> Any:
    return _Entry(
        name=name, value=value, read_only=read_only, config_source=source,
        is_default=source == DEFAULT_CONFIG_SOURCE, is_sensitive=False, synonyms=[],
        config_type=0, documentation=None,
    )  # fmt: skip
