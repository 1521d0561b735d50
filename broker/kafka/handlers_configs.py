"""DescribeConfigs, AlterConfigs and IncrementalAlterConfigs on the Kafka listener, as Kafka
2.6's AdminManager answers them (`kafka/server/AdminManager.scala`).

Topic configs are written to `/config/topics/<t>` and broker configs to `/config/brokers/<id>`
or `/config/brokers/<default>`, each with a change notification (minibroker.client.config_zk);
every broker applies them (broker.dynamic_config). As in Kafka: a broker resource must name this
broker or be empty (the cluster-wide default); an unknown topic config is INVALID_CONFIG; a value
that does not parse, or a broker config that cannot change at run time, is INVALID_REQUEST (the
ConfigException wrapped in an InvalidRequestException, `PlaintextAdminIntegrationTest.
checkInvalidAlterConfigs`); altering a topic that does not exist is UNKNOWN_SERVER_ERROR with no
message, as in 2.6 (AdminZkClient.validateTopicConfig's AdminOperationException; 2.7 answers
UNKNOWN_TOPIC_OR_PARTITION); nothing is written for a resource that fails."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.protocol.admin.configs import (
    AlterConfigsResponse,
    DescribeConfigsResponse,
    IncrementalAlterConfigsResponse,
)

from broker.kafka.context import KafkaContext
from minibroker.client import config_zk
from minibroker.core.broker_config import (
    DEFAULT_ENTITY,
    DYNAMIC_BROKER_CONFIGS,
    ConfigSource,
    broker_value_source,
    topic_value_source,
    validate_dynamic_broker_config,
)
from minibroker.core.config_def import ConfigType
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.security.acl import AclOperation, ResourceType
from minibroker.core.topic_config import TOPIC_CONFIGS, InvalidTopicConfigValue
from minibroker.runtime import logging as slog
from minibroker.runtime.properties import PROPERTY_BY_NAME
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_errors import ZkError

TOPIC_RESOURCE = 2
BROKER_RESOURCE = 4
# IncrementalAlterConfigs' operations (AlterConfigOp.OpType).
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

_Described = DescribeConfigsResponse.DescribeConfigsResult
_Entry = _Described.DescribeConfigsResourceResult
_Synonym = _Entry.DescribeConfigsSynonym
_Altered = AlterConfigsResponse.AlterConfigsResourceResponse
_Incremental = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse


# ---- DescribeConfigs --------------------------------------------------------------------------


async def handle_describe_configs(ctx: KafkaContext, request: Any, version: int) -> Any:
    synonyms = bool(getattr(request, "include_synonyms", False)) if version >= 1 else False
    results = []
    for r in request.resources:
        keys = None if r.configuration_keys is None else set(r.configuration_keys)
        try:
            entries = await _describe(ctx, r.resource_type, r.resource_name, synonyms)
            error, message = ErrorCode.NONE, None
        except ApiError as exc:
            entries, error, message = [], exc.code, exc.message
        except ZkError as exc:
            entries, error, message = [], ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
        results.append(
            _Described(
                error_code=int(error),
                error_message=message or None,
                resource_type=r.resource_type,
                resource_name=r.resource_name,
                configs=[e for e in entries if keys is None or e.name in keys],
            )  # fmt: skip
        )
    return DescribeConfigsResponse(throttle_time_ms=0, results=results)


def _check_permission(ctx: KafkaContext, kind: int, name: str, operation: AclOperation) -> None:
    """KafkaApis: DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic (TOPIC_AUTHORIZATION_FAILED) or
    on the Cluster for a broker (CLUSTER_AUTHORIZATION_FAILED)."""
    if kind == TOPIC_RESOURCE and not ctx.may(operation, ResourceType.TOPIC, name):
        raise ApiError(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "")
    if kind == BROKER_RESOURCE and not ctx.may_cluster(operation):
        raise ApiError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "")


async def _describe(ctx: KafkaContext, kind: int, name: str, synonyms: bool) -> list[Any]:
    _check_permission(ctx, kind, name, AclOperation.DESCRIBE_CONFIGS)
    settings = ctx.rm.settings
    default, own = settings.dynamic
    static = settings.static_strings()
    if kind == TOPIC_RESOURCE:
        if name not in ctx.rm.metadata.topics():
            raise ApiError(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        topic = await asyncio.to_thread(config_zk.read_entity_config, ctx.rm.store, "topics", name)
        out = []
        for key in sorted(TOPIC_CONFIGS):
            value, source = topic_value_source(key, topic, own, default, static)
            chain = _topic_synonyms(key, topic, own, default, static) if synonyms else []
            out.append(_entry(key, value, source, False, TOPIC_CONFIGS[key].key.type, chain))
        return out
    if kind != BROKER_RESOURCE:
        raise ApiError(ErrorCode.INVALID_REQUEST, f"Unsupported resource type: {kind}")
    if name == "":  # the cluster-wide dynamic defaults that are set, and only those
        return [
            _entry(k, v, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG, False, _type_of(k), [])
            for k, v in sorted(default.items())
        ]
    _own_broker_or_raise(ctx, name, " or empty string")
    out = []
    for key, value in sorted(settings.as_strings().items()):
        found = broker_value_source(key, own, default, static)
        source = found[1] if found else ConfigSource.DEFAULT_CONFIG
        chain = _broker_synonyms(key, own, default, static, value) if synonyms else []
        read_only = key not in DYNAMIC_BROKER_CONFIGS
        out.append(_entry(key, value, source, read_only, _type_of(key), chain))
    return out


def _topic_synonyms(
    key: str, topic: dict[str, str], own: dict[str, str], default: dict[str, str],
    static: dict[str, str],
) -> list[Any]:  # fmt: skip
    chain = [_Synonym(name=key, value=topic[key], source=1)] if key in topic else []
    synonym = TOPIC_CONFIGS[key].synonym
    if synonym is not None:
        fallback = TOPIC_CONFIGS[key].key.default
        chain += _broker_synonyms(synonym, own, default, static, fallback)
    return chain


def _broker_synonyms(
    key: str, own: dict[str, str], default: dict[str, str], static: dict[str, str],
    fallback: str,
) -> list[Any]:  # fmt: skip
    chain = [
        _Synonym(name=key, value=layer[key], source=int(source))
        for layer, source in (
            (own, ConfigSource.DYNAMIC_BROKER_CONFIG),
            (default, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
            (static, ConfigSource.STATIC_BROKER_CONFIG),
        )
        if key in layer
    ]
    return [*chain, _Synonym(name=key, value=fallback, source=int(ConfigSource.DEFAULT_CONFIG))]


def _type_of(name: str) -> ConfigType | None:
    key = DYNAMIC_BROKER_CONFIGS.get(name)
    if key is not None:
        return key.type
    prop = PROPERTY_BY_NAME.get(name)
    if prop is None:
        return None
    return {bool: ConfigType.BOOLEAN, int: ConfigType.LONG, float: ConfigType.DOUBLE}.get(
        prop.type, ConfigType.STRING
    )


def _entry(
    name: str, value: str, source: ConfigSource, read_only: bool, kind: ConfigType | None,
    synonyms: list[Any],
) -> Any:  # fmt: skip
    # A secret (delegation.token.master.key) as Kafka answers a PASSWORD config: no value.
    sensitive = Settings.sensitive(name)
    return _Entry(
        name=name, value=None if sensitive else value, read_only=read_only,
        config_source=int(source), is_default=source == ConfigSource.DEFAULT_CONFIG,
        is_sensitive=sensitive, synonyms=[] if sensitive else synonyms,
        config_type=kind.value if kind else 0, documentation=None,
    )  # fmt: skip


def _own_broker_or_raise(ctx: KafkaContext, name: str, alternative: str = "") -> int:
    """AdminManager.getBrokerId: a broker resource's name is this broker's id."""
    try:
        broker_id = int(name)
    except ValueError:
        raise ApiError(
            ErrorCode.INVALID_REQUEST, f"Broker id must be an integer, but it is: {name}"
        ) from None
    if broker_id != ctx.rm.broker_id:
        raise ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Unexpected broker id, expected {ctx.rm.broker_id}{alternative}, but received {name}",
        )
    return broker_id


# ---- AlterConfigs and IncrementalAlterConfigs ---------------------------------------------------


async def handle_alter_configs(ctx: KafkaContext, request: Any, version: int) -> Any:
    responses = []
    for r in request.resources:
        new = {c.name: c.value for c in r.configs}
        error: ApiError | None
        if any(v is None for v in new.values()):
            nulls = ",".join(k for k, v in new.items() if v is None)
            error = ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls}")
        else:
            error = await _alter(ctx, r.resource_type, r.resource_name, lambda _cur, n=new: n,
                                 bool(request.validate_only))  # fmt: skip
        responses.append(_Altered(**_result(r, error)))
    return AlterConfigsResponse(throttle_time_ms=0, responses=responses)


async def handle_incremental_alter_configs(ctx: KafkaContext, request: Any, version: int) -> Any:
    responses = []
    for r in request.resources:
        ops = [(int(c.config_operation), c.name, c.value) for c in r.configs]
        error = _check_ops(ops)
        if error is None:
            error = await _alter(ctx, r.resource_type, r.resource_name,
                                 lambda cur, o=ops: _incremental(cur, o),
                                 bool(request.validate_only))  # fmt: skip
        responses.append(_Incremental(**_result(r, error)))
    return IncrementalAlterConfigsResponse(throttle_time_ms=0, responses=responses)


def _result(r: Any, error: ApiError | None) -> dict[str, Any]:
    return {
        "error_code": int(error.code) if error else 0,
        "error_message": (error.message or None) if error else None,
        "resource_type": r.resource_type,
        "resource_name": r.resource_name,
    }


def _check_ops(ops: list[tuple[int, str, str | None]]) -> ApiError | None:
    names = [name for _, name, _ in ops]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        return ApiError(
            ErrorCode.INVALID_REQUEST,
            f"Error due to duplicate config keys : {','.join(duplicates)}",
        )
    nulls = [f"{op}:{name}" for op, name, value in ops if value is None and op != DELETE]
    if nulls:
        return ApiError(ErrorCode.INVALID_REQUEST, f"Null value not supported for : {nulls}")
    if any(op not in (SET, DELETE, APPEND, SUBTRACT) for op, _, _ in ops):
        return ApiError(ErrorCode.INVALID_REQUEST, "unknown config operation")
    return None


def _incremental(current: dict[str, str], ops: list[tuple[int, str, str | None]]) -> dict[str, str]:
    """AdminManager.prepareIncrementalConfigs: SET, DELETE, and APPEND/SUBTRACT on lists."""
    out = dict(current)
    for op, name, value in ops:
        if op == SET:
            assert value is not None
            out[name] = value
        elif op == DELETE:
            out.pop(name, None)
        else:
            topic_config = TOPIC_CONFIGS.get(name)
            if topic_config is None:
                raise ApiError(ErrorCode.INVALID_CONFIG, f"Unknown topic config name: {name}")
            if topic_config.key.type is not ConfigType.LIST:
                verb = "append" if op == APPEND else "subtract"
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"Config value {verb} is not allowed for config key: {name}",
                )
            old = (out.get(name) or topic_config.key.default).split(",")
            old = [v for v in old if v]
            given = (value or "").split(",")
            new = old + given if op == APPEND else [v for v in old if v not in given]
            out[name] = ",".join(new)
    return out


async def _alter(ctx: KafkaContext, kind: int, name: str, change: Any, validate_only: bool) -> (
    ApiError | None
):  # fmt: skip
    store = ctx.rm.store
    try:
        _check_permission(ctx, kind, name, AclOperation.ALTER_CONFIGS)
        if kind == TOPIC_RESOURCE:
            current = await asyncio.to_thread(config_zk.read_entity_config, store, "topics", name)
            new = change(current)
            try:
                await asyncio.to_thread(config_zk.check_topic_alterable, store, name, new)
            except InvalidTopicConfigValue as exc:
                raise ApiError(
                    ErrorCode.INVALID_REQUEST,
                    f"Invalid config value for resource ConfigResource(type=TOPIC, "
                    f"name='{name}'): {exc.message}",
                ) from None
            if not validate_only:
                await asyncio.to_thread(config_zk.change_topic_config, store, name, new)
            return None
        if kind != BROKER_RESOURCE:
            raise ApiError(
                ErrorCode.INVALID_REQUEST,
                f"AlterConfigs is only supported for topics and brokers, but resource type is "
                f"{kind}",
            )
        broker_id = None if name == "" else _own_broker_or_raise(ctx, name)
        entity = DEFAULT_ENTITY if broker_id is None else str(broker_id)
        current = await asyncio.to_thread(config_zk.read_entity_config, store, "brokers", entity)
        new = change(current)
        static = set(PROPERTY_BY_NAME)
        if validate_only:
            validate_dynamic_broker_config(new, static)
        else:
            await asyncio.to_thread(config_zk.change_broker_config, store, broker_id, new, static)
        return None
    except ApiError as exc:
        error = exc
    except ZkError as exc:
        error = ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}")
    if error.code is not ErrorCode.UNKNOWN_SERVER_ERROR:
        return error
    # AdminManager logs the failure and ApiError.fromThrowable answers UNKNOWN_SERVER_ERROR
    # without a message, so as not to leak the broker's internals.
    slog.event(
        "alter_configs_failed", logging.WARNING, resource_type=kind, resource=name,
        error=error.message,
    )  # fmt: skip
    return ApiError(ErrorCode.UNKNOWN_SERVER_ERROR, "")
