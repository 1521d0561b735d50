"""The Control gRPC service of a broker: the controller's LeaderAndIsr, UpdateMetadata and
StopReplica, validated and handed to the replica manager; Kafka error codes out, nothing
raised across gRPC."""

from __future__ import annotations

from typing import Any

from broker.metadata_cache import LiveBroker, PartitionMetadata
from broker.replica_manager import ReplicaManager
from broker.replication.partition import PartitionState
from broker.request_handling import guarded, opt_field
from broker.security.authorizer import BrokerAuthorizer
from broker.security.grpc_peers import GrpcPeerCheck
from broker.types import (
    ControlHeader,
    LeaderAndIsrPartition,
    StopReplicaPartition,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.listeners import Endpoint, pick
from minibroker.core.types import TopicPartition
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime.wire import error_to_wire

# A control request from a peer without a controller's certificate (Kafka: CLUSTER_ACTION).
_REFUSED_CODE = error_to_wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
_REFUSED_WHY = "only the controller's certificate may send this"
NOT_THE_CONTROLLER = "brokers forward this to the active controller; ask the controller"


def _add_partition_errors(response: Any, errors: dict[TopicPartition, ErrorCode]) -> None:
    for tp, error in errors.items():
        response.partition_errors.add(
            topic_name=tp.topic, partition_index=tp.partition, error_code=error_to_wire(error)
        )


class ControlServicer(control_pb2_grpc.ControlServicer):  # type: ignore[misc]
    """LeaderAndIsr, UpdateMetadata and StopReplica from the controller (reference §3.3, §3.4)."""

    def __init__(self, rm: ReplicaManager, peers: GrpcPeerCheck | None = None) -> None:
        self.rm = rm
        self.peers = peers or GrpcPeerCheck(False, BrokerAuthorizer(None, None), "")

    @staticmethod
    def _header(request: Any) -> ControlHeader:
        return ControlHeader(
            controller_id=int(request.controller_id),
            controller_epoch=int(request.controller_epoch),
            broker_epoch=opt_field(request, "broker_epoch", -1),
        )

    async def LeaderAndIsr(self, request: Any, context: Any) -> control_pb2.LeaderAndIsrResponse:  # noqa: N802
        if not self.peers.controller(context, "LeaderAndIsr"):
            return control_pb2.LeaderAndIsrResponse(
                error_code=_REFUSED_CODE, error_message=_REFUSED_WHY
            )

        async def handle() -> control_pb2.LeaderAndIsrResponse:
            partitions = [
                LeaderAndIsrPartition(
                    TopicPartition(t.topic_name, p.partition_index),
                    PartitionState(
                        leader=p.leader,
                        leader_epoch=p.leader_epoch,
                        isr=tuple(p.isr),
                        replicas=tuple(p.replicas),
                        zk_version=p.zk_version,
                        controller_epoch=p.controller_epoch,
                    ),
                )
                for t in request.topic_states
                for p in t.partition_states
            ]
            top, errors = await self.rm.become_leader_or_follower(self._header(request), partitions)
            response = control_pb2.LeaderAndIsrResponse(error_code=error_to_wire(top))
            _add_partition_errors(response, errors)
            return response

        def failed(code: ErrorCode) -> control_pb2.LeaderAndIsrResponse:
            return control_pb2.LeaderAndIsrResponse(error_code=error_to_wire(code))

        return await guarded(self.rm, "LeaderAndIsr", handle(), failed)

    async def UpdateMetadata(
        self, request: Any, context: Any
    ) -> control_pb2.UpdateMetadataResponse:  # noqa: N802
        if not self.peers.controller(context, "UpdateMetadata"):
            return control_pb2.UpdateMetadataResponse(
                error_code=_REFUSED_CODE, error_message=_REFUSED_WHY
            )

        async def handle() -> control_pb2.UpdateMetadataResponse:
            brokers = []
            for b in request.live_brokers:
                endpoints = tuple(
                    Endpoint(e.listener or "PLAINTEXT", e.host, e.port) for e in b.endpoints
                )
                ep = pick(endpoints, self.rm.inter_broker_listener) or pick(endpoints)
                if ep is not None:
                    rack = b.rack if b.HasField("rack") else None
                    brokers.append(LiveBroker(b.id, ep.host, ep.port, rack, endpoints))
            states = [
                (
                    TopicPartition(t.topic_name, p.partition_index),
                    PartitionMetadata(
                        leader=p.leader,
                        leader_epoch=p.leader_epoch,
                        isr=tuple(p.isr),
                        replicas=tuple(p.replicas),
                        offline_replicas=tuple(p.offline_replicas),
                        zk_version=p.zk_version,
                        controller_epoch=p.controller_epoch,
                    ),
                )
                for t in request.topic_states
                for p in t.partition_states
            ]
            error = self.rm.update_metadata(self._header(request), brokers, states)
            return control_pb2.UpdateMetadataResponse(error_code=error_to_wire(error))

        def failed(code: ErrorCode) -> control_pb2.UpdateMetadataResponse:
            return control_pb2.UpdateMetadataResponse(error_code=error_to_wire(code))

        return await guarded(self.rm, "UpdateMetadata", handle(), failed)

    async def StopReplica(self, request: Any, context: Any) -> control_pb2.StopReplicaResponse:  # noqa: N802
        if not self.peers.controller(context, "StopReplica"):
            return control_pb2.StopReplicaResponse(
                error_code=_REFUSED_CODE, error_message=_REFUSED_WHY
            )

        async def handle() -> control_pb2.StopReplicaResponse:
            partitions = [
                StopReplicaPartition(
                    TopicPartition(t.topic_name, p.partition_index),
                    opt_field(p, "leader_epoch", -1),
                    bool(p.delete_partition),
                )
                for t in request.topic_states
                for p in t.partition_states
            ]
            top, errors = await self.rm.stop_replicas(self._header(request), partitions)
            response = control_pb2.StopReplicaResponse(error_code=error_to_wire(top))
            _add_partition_errors(response, errors)
            return response

        def failed(code: ErrorCode) -> control_pb2.StopReplicaResponse:
            return control_pb2.StopReplicaResponse(error_code=error_to_wire(code))

        return await guarded(self.rm, "StopReplica", handle(), failed)

    async def ControlledShutdown(  # noqa: N802
        self, request: Any, context: Any
    ) -> control_pb2.ControlledShutdownResponse:
        return control_pb2.ControlledShutdownResponse(
            error_code=error_to_wire(ErrorCode.NOT_CONTROLLER),
            error_message="brokers do not handle ControlledShutdown; send it to the controller",
        )

    # The controller's admin requests: a broker is not the controller.

    async def AlterPartitionReassignments(  # noqa: N802
        self, request: Any, context: Any
    ) -> control_pb2.AlterPartitionReassignmentsResponse:
        return control_pb2.AlterPartitionReassignmentsResponse(
            error_code=error_to_wire(ErrorCode.NOT_CONTROLLER), error_message=NOT_THE_CONTROLLER
        )

    async def ListPartitionReassignments(  # noqa: N802
        self, request: Any, context: Any
    ) -> control_pb2.ListPartitionReassignmentsResponse:
        return control_pb2.ListPartitionReassignmentsResponse(
            error_code=error_to_wire(ErrorCode.NOT_CONTROLLER), error_message=NOT_THE_CONTROLLER
        )

    async def ElectLeaders(self, request: Any, context: Any) -> control_pb2.ElectLeadersResponse:  # noqa: N802
        return control_pb2.ElectLeadersResponse(
            error_code=error_to_wire(ErrorCode.NOT_CONTROLLER), error_message=NOT_THE_CONTROLLER
        )
