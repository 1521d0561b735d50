"""WriteTxnMarkers on a partition leader (KafkaApis.handleWriteTxnMarkers): a transaction
coordinator's COMMIT/ABORT markers appended to the partitions led here, acks=all, answered per
partition. Only the cluster's own nodes (or a principal with ClusterAction) may send them."""

from __future__ import annotations

from typing import Any

from broker.replica_manager import ReplicaManager
from broker.request_handling import guarded
from broker.security.grpc_peers import GrpcPeerCheck
from broker.transactions.marker_channel import MARKER_TIMEOUT_MS
from minibroker.core.control_records import Marker
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation
from minibroker.core.types import TopicPartition
from minibroker.rpc import txn_pb2, txn_pb2_grpc
from minibroker.runtime.wire import error_to_wire


class TxnMarkersServicer(txn_pb2_grpc.TxnMarkersServicer):  # type: ignore[misc]
    def __init__(self, rm: ReplicaManager, peers: GrpcPeerCheck) -> None:
        self.rm = rm
        self.peers = peers

    async def WriteTxnMarkers(  # noqa: N802
        self, request: Any, context: Any
    ) -> txn_pb2.WriteTxnMarkersResponse:
        def failed(code: ErrorCode) -> txn_pb2.WriteTxnMarkersResponse:
            return _answer(request, lambda tp: code)

        if not self.peers.may_cluster(context, AclOperation.CLUSTER_ACTION):
            return failed(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        return await guarded(self.rm, "WriteTxnMarkers", self._write(request), failed)

    async def _write(self, request: Any) -> txn_pb2.WriteTxnMarkersResponse:
        errors: dict[tuple[int, TopicPartition], ErrorCode] = {}
        for m in request.markers:
            tps = [TopicPartition(t.name, p) for t in m.topics for p in t.partition_indexes]
            marker = Marker(m.transaction_result, m.coordinator_epoch)
            written = await self.rm.appends.append_markers(
                MARKER_TIMEOUT_MS, m.producer_id, m.producer_epoch, marker, tps
            )
            errors.update({(m.producer_id, tp): e for tp, e in written.items()})
        return _answer(request, lambda key: errors.get(key, ErrorCode.UNKNOWN_SERVER_ERROR))


def _answer(request: Any, error_of: Any) -> txn_pb2.WriteTxnMarkersResponse:
    response = txn_pb2.WriteTxnMarkersResponse()
    for m in request.markers:
        result = response.markers.add(producer_id=m.producer_id)
        for t in m.topics:
            topic = result.topics.add(name=t.name)
            for p in t.partition_indexes:
                code = error_of((m.producer_id, TopicPartition(t.name, p)))
                topic.partitions.add(partition_index=p, error_code=error_to_wire(code))
    return response
