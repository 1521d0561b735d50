"""AlterPartitionReassignments, ListPartitionReassignments (KIP-455) and ElectLeaders
(KIP-460) on the Kafka listener. A Kafka broker hands these to its controller's event queue;
minibroker's controller is a process of its own, so the broker forwards them over gRPC to the
active controller (minibroker.client.controller_admin) and turns its answer into Kafka's.
ElectLeaders then waits, up to the request's timeout, until this broker's metadata shows each
elected leader (Kafka's DelayedElectLeader)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsResponse,
    ElectLeadersResponse,
    ListPartitionReassignmentsResponse,
)

from broker.kafka.context import KafkaContext
from minibroker.client import controller_admin
from minibroker.client.controller_admin import ControllerUnavailable, PartitionOutcome
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation
from minibroker.core.types import TopicPartition
from minibroker.runtime.zk_errors import ZkError

_AlterTopic = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
_AlterPartition = _AlterTopic.ReassignablePartitionResponse
_ListTopic = ListPartitionReassignmentsResponse.OngoingTopicReassignment
_ListPartition = _ListTopic.OngoingPartitionReassignment
_Elected = ElectLeadersResponse.ReplicaElectionResult
_ElectedPartition = _Elected.PartitionResult


class _Denied(Exception):
    """The principal may not: CLUSTER_AUTHORIZATION_FAILED for the whole request."""


def _unavailable(exc: Exception) -> tuple[ErrorCode, str]:
    # No controller to ask: Kafka's brokers answer NOT_CONTROLLER when theirs is gone, and
    # clients retry against the controller the next Metadata names.
    return ErrorCode.NOT_CONTROLLER, str(exc)


async def handle_alter_partition_reassignments(
    ctx: KafkaContext, request: Any, version: int
) -> Any:
    targets: dict[TopicPartition, tuple[int, ...] | None] = {
        TopicPartition(t.name, p.partition_index): (
            None if p.replicas is None else tuple(p.replicas)
        )
        for t in request.topics
        for p in t.partitions
    }
    try:
        if not ctx.may_cluster(AclOperation.ALTER):  # KafkaApis: ALTER on the Cluster
            raise _Denied
        top, message, results = await controller_admin.alter_partition_reassignments(
            ctx.rm.store, targets, ctx.rm.inter_broker_listener
        )
    except _Denied:
        top, message, results = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "", {}
    except (ControllerUnavailable, ZkError) as exc:
        top, message = _unavailable(exc)
        results = {}
    by_topic: dict[str, list[Any]] = {}
    for tp in targets:
        outcome = results.get(tp, PartitionOutcome(top, message))
        by_topic.setdefault(tp.topic, []).append(
            _AlterPartition(
                partition_index=tp.partition,
                error_code=int(outcome.error),
                error_message=outcome.message,
            )  # fmt: skip
        )
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=int(top), error_message=message or None,
        responses=[_AlterTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )  # fmt: skip


async def handle_list_partition_reassignments(ctx: KafkaContext, request: Any, version: int) -> Any:
    wanted = (
        None
        if request.topics is None
        else [TopicPartition(t.name, p) for t in request.topics for p in t.partition_indexes]
    )
    try:
        if not ctx.may_cluster(AclOperation.DESCRIBE):  # KafkaApis: DESCRIBE on the Cluster
            raise _Denied
        top, message, ongoing = await controller_admin.list_partition_reassignments(
            ctx.rm.store, wanted, ctx.rm.inter_broker_listener
        )
    except _Denied:
        top, message, ongoing = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "", {}
    except (ControllerUnavailable, ZkError) as exc:
        (top, message), ongoing = _unavailable(exc), {}
    by_topic: dict[str, list[Any]] = {}
    for tp, a in sorted(ongoing.items()):
        by_topic.setdefault(tp.topic, []).append(
            _ListPartition(
                partition_index=tp.partition,
                replicas=list(a.replicas),
                adding_replicas=list(a.adding),
                removing_replicas=list(a.removing),
            )  # fmt: skip
        )
    return ListPartitionReassignmentsResponse(
        throttle_time_ms=0, error_code=int(top), error_message=message or None,
        topics=[_ListTopic(name=n, partitions=ps) for n, ps in by_topic.items()],
    )  # fmt: skip


async def handle_elect_leaders(ctx: KafkaContext, request: Any, version: int) -> Any:
    election_type = int(request.election_type) if version >= 1 else 0
    wanted = (
        None
        if request.topic_partitions is None
        else [TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    if wanted is None:  # KafkaApis: null means every partition this broker's metadata knows
        wanted = sorted(ctx.rm.metadata.partitions)
    try:
        if not ctx.may_cluster(AclOperation.ALTER):  # KafkaApis: ALTER on the Cluster
            raise _Denied
        top, message, results = await controller_admin.elect_leaders(
            ctx.rm.store, election_type, wanted, ctx.rm.inter_broker_listener
        )
    except _Denied:
        top, message, results = ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "", {}
    except (ControllerUnavailable, ZkError) as exc:
        (top, message), results = _unavailable(exc), {}
    if top is ErrorCode.NONE:
        await _wait_for_leaders(ctx, results, int(request.timeout_ms))
    by_topic: dict[str, list[Any]] = {}
    for tp in wanted:
        outcome = results.get(tp, PartitionOutcome(top, message))
        by_topic.setdefault(tp.topic, []).append(
            _ElectedPartition(
                partition_id=tp.partition,
                error_code=int(outcome.error),
                error_message=outcome.message,
            )  # fmt: skip
        )
    return ElectLeadersResponse(
        throttle_time_ms=0, error_code=int(top) if top is not ErrorCode.NONE else 0,
        replica_election_results=[_Elected(topic=n, partition_result=ps)
                                  for n, ps in by_topic.items()],
    )  # fmt: skip


async def _wait_for_leaders(
    ctx: KafkaContext, results: Mapping[TopicPartition, PartitionOutcome], timeout_ms: int
) -> None:
    elected = {tp: o.leader for tp, o in results.items() if o.error is ErrorCode.NONE}

    def shown() -> bool:
        cache = ctx.rm.metadata.partitions
        return all(tp in cache and cache[tp].leader == leader for tp, leader in elected.items())

    if elected and timeout_ms > 0:
        await ctx.rm.metadata.wait_for(shown, timeout_ms / 1000)
