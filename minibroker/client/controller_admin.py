"""The admin requests only the active controller answers (AlterPartitionReassignments,
ListPartitionReassignments, ElectLeaders), over gRPC to the controller ZooKeeper names: what a
Kafka broker forwards to its controller, and what the CLI asks directly. Returns plain types;
no _pb2 object leaves this module."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import grpc

from minibroker.core.errors import ErrorCode
from minibroker.core.listeners import from_strings, pick
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import ControllerEndpointZNode
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime.wire import error_from_wire
from minibroker.runtime.zk_store import ZkStore

REQUEST_TIMEOUT_S = 30.0


class ControllerUnavailable(RuntimeError):
    """No active controller could be asked (none elected, or it did not answer)."""


def controller_address(store: ZkStore, listener: str = "") -> str | None:
    """The active controller's gRPC address: /controller's id, then its endpoint znode's
    endpoint on `listener` (none given: PLAINTEXT or the first)."""
    controller_id = store.read_controller()
    if controller_id is None:
        return None
    got = store.get_or_none(ControllerEndpointZNode.path(controller_id))
    if got is None:
        return None
    endpoints = from_strings(ControllerEndpointZNode.decode(got[0]))
    endpoint = pick(endpoints, listener) or pick(endpoints)
    return None if endpoint is None else endpoint.address


@dataclass(frozen=True)
class PartitionOutcome:
    error: ErrorCode
    message: str | None = None
    leader: int = -1


@dataclass(frozen=True)
class Ongoing:
    """A partition being reassigned: RS with its adding and removing replicas."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


async def _call(store: ZkStore, listener: str, method: str, request: object) -> object:
    address = await asyncio.to_thread(controller_address, store, listener)
    if address is None:
        raise ControllerUnavailable("no controller is elected (/controller does not exist)")
    try:
        async with grpc_security.aio_channel(address) as channel:
            stub = control_pb2_grpc.ControlStub(channel)
            return await getattr(stub, method)(request, timeout=REQUEST_TIMEOUT_S)
    except grpc.aio.AioRpcError as exc:
        raise ControllerUnavailable(
            f"the controller at {address} did not answer: {exc.code().name}"
        ) from None


def _refs(tps: Iterable[TopicPartition]) -> list[control_pb2.PartitionRef]:
    return [control_pb2.PartitionRef(topic=tp.topic, partition=tp.partition) for tp in tps]


def _outcomes(response: object) -> tuple[ErrorCode, str, dict[TopicPartition, PartitionOutcome]]:
    top = error_from_wire(response.error_code)  # type: ignore[attr-defined]
    results = {
        TopicPartition(r.topic, r.partition): PartitionOutcome(
            error_from_wire(r.error_code), r.error_message or None, r.leader
        )
        for r in response.results  # type: ignore[attr-defined]
    }
    return top, response.error_message, results  # type: ignore[attr-defined]


async def alter_partition_reassignments(
    store: ZkStore, targets: Mapping[TopicPartition, Sequence[int] | None], listener: str = ""
) -> tuple[ErrorCode, str, dict[TopicPartition, PartitionOutcome]]:
    """Start (a replica list) or cancel (None) each partition's reassignment."""
    request = control_pb2.AlterPartitionReassignmentsRequest(
        partitions=[
            control_pb2.ReassignablePartition(
                topic=tp.topic,
                partition=tp.partition,
                cancel=replicas is None,
                replicas=list(replicas or ()),
            )
            for tp, replicas in targets.items()
        ]
    )
    return _outcomes(await _call(store, listener, "AlterPartitionReassignments", request))


async def list_partition_reassignments(
    store: ZkStore, tps: Iterable[TopicPartition] | None = None, listener: str = ""
) -> tuple[ErrorCode, str, dict[TopicPartition, Ongoing]]:
    """The given partitions (None: every partition) that are being reassigned."""
    request = control_pb2.ListPartitionReassignmentsRequest(
        all=tps is None, partitions=_refs(tps or ())
    )
    response: object = await _call(store, listener, "ListPartitionReassignments", request)
    ongoing = {
        TopicPartition(r.topic, r.partition): Ongoing(
            tuple(r.replicas), tuple(r.adding_replicas), tuple(r.removing_replicas)
        )
        for r in response.reassignments  # type: ignore[attr-defined]
    }
    top = error_from_wire(response.error_code)  # type: ignore[attr-defined]
    return top, response.error_message, ongoing  # type: ignore[attr-defined]


async def elect_leaders(
    store: ZkStore, election_type: int, tps: Iterable[TopicPartition] | None, listener: str = ""
) -> tuple[ErrorCode, str, dict[TopicPartition, PartitionOutcome]]:
    """A preferred (0) or unclean (1) election of the given partitions (None: all)."""
    request = control_pb2.ElectLeadersRequest(
        election_type=election_type, all=tps is None, partitions=_refs(tps or ())
    )
    return _outcomes(await _call(store, listener, "ElectLeaders", request))
