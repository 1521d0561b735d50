"""transaction.partition.verification.enable (KIP-890 part 1, "Transactions Server-Side
Defense", Kafka 3.6; off by default here, as Kafka 2.6 has no such check): before a leader
appends a producer's first transactional batch to a partition where that producer has no
transaction open, it asks the transactional id's coordinator whether the partition is in the
producer's ongoing transaction with that producer id and epoch. The leader's side of the
question (Kafka's AddPartitionsToTxnManager.verifyTransaction) and the coordinator's gRPC
answer (AddPartitionsToTxn v4 with verify_only; here a VerifyPartitionsInTxn call).

How the coordinator's answers reach the producer, as Kafka 3.6's
ReplicaManager.appendRecords (postVerificationCallback) maps them: INVALID_TXN_STATE as it is
("Partition was not added to the transaction"); CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION,
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE and NOT_COORDINATOR as
NOT_ENOUGH_REPLICAS, which every client retries without a metadata refresh; the rest
(INVALID_PRODUCER_EPOCH, INVALID_PRODUCER_ID_MAPPING) as they are.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import grpc

from broker.replica_manager import ReplicaManager
from broker.request_handling import guarded
from broker.security.grpc_peers import GrpcPeerCheck
from broker.transactions.coordinator import TransactionCoordinator
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation
from minibroker.core.types import TRANSACTION_STATE_TOPIC, TopicPartition
from minibroker.rpc import txn_pb2, txn_pb2_grpc
from minibroker.runtime import logging as slog
from minibroker.runtime.wire import error_from_wire, error_to_wire

E = ErrorCode
VERIFY_TIMEOUT_S = 10.0
RETRIED_AS_NOT_ENOUGH_REPLICAS = frozenset(
    {
        E.CONCURRENT_TRANSACTIONS,
        E.NETWORK_EXCEPTION,
        E.COORDINATOR_LOAD_IN_PROGRESS,
        E.COORDINATOR_NOT_AVAILABLE,
        E.NOT_COORDINATOR,
    }
)


def produce_error(coordinator_answer: ErrorCode) -> ErrorCode:
    """What the producer is answered for a partition, given the coordinator's answer."""
    if coordinator_answer in RETRIED_AS_NOT_ENOUGH_REPLICAS:
        return E.NOT_ENOUGH_REPLICAS
    return coordinator_answer


class TxnVerifier:
    """The leader's side: one question per produce request to the coordinator of its
    transactional id (this broker's own coordinator directly, another's over gRPC)."""

    def __init__(self, rm: ReplicaManager, coordinator: TransactionCoordinator) -> None:
        self.rm = rm
        self.coordinator = coordinator

    async def verify(
        self, tid: str, producer_id: int, epoch: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """What to answer the producer for each partition (NONE: the coordinator confirmed
        it is in the transaction); each refusal is a txn_verification_refused event."""
        answers = await self._ask(tid, producer_id, epoch, tps)
        for tp, answer in answers.items():
            if answer is not E.NONE:
                slog.event("txn_verification_refused", logging.WARNING, tp=str(tp),
                           transactional_id=tid, producer_id=producer_id, epoch=epoch,
                           coordinator_error=answer.name,
                           error=produce_error(answer).name)  # fmt: skip
        return {tp: produce_error(a) for tp, a in answers.items()}

    async def _ask(
        self, tid: str, producer_id: int, epoch: int, tps: list[TopicPartition]
    ) -> dict[TopicPartition, ErrorCode]:
        """The coordinator's answer for each partition."""
        state_tp = TopicPartition(TRANSACTION_STATE_TOPIC, self.coordinator.state.partition_of(tid))
        state = self.rm.metadata.partitions.get(state_tp)
        leader = -1 if state is None else state.leader
        pairs = [(tp.topic, tp.partition) for tp in tps]
        if leader == self.rm.broker_id:
            answers = self.coordinator.verify_partitions(tid, producer_id, epoch, pairs)
            return {TopicPartition(*p): e for p, e in answers.items()}
        broker = self.rm.metadata.brokers.get(leader)
        if broker is None:
            return dict.fromkeys(tps, E.COORDINATOR_NOT_AVAILABLE)
        request = txn_pb2.VerifyPartitionsInTxnRequest(
            transactional_id=tid, producer_id=producer_id, producer_epoch=epoch
        )
        by_topic: dict[str, list[int]] = {}
        for tp in tps:
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        for topic, partitions in sorted(by_topic.items()):
            request.topics.add(name=topic, partition_indexes=partitions)
        stub = txn_pb2_grpc.TxnVerificationStub(
            self.coordinator.channel.peers.get(f"{broker.host}:{broker.port}")
        )
        try:
            response = await stub.VerifyPartitionsInTxn(request, timeout=VERIFY_TIMEOUT_S)
        except grpc.aio.AioRpcError:
            return dict.fromkeys(tps, E.NETWORK_EXCEPTION)
        everything = error_from_wire(response.error_code)
        if everything is not E.NONE:
            return dict.fromkeys(tps, everything)
        out = dict.fromkeys(tps, E.UNKNOWN_SERVER_ERROR)  # a partition left unanswered
        for t in response.topics:
            for p in t.partitions:
                out[TopicPartition(t.name, p.partition_index)] = error_from_wire(p.error_code)
        return out


class TxnVerificationServicer(txn_pb2_grpc.TxnVerificationServicer):  # type: ignore[misc]
    """The coordinator's side, for the cluster's own brokers (ClusterAction, as markers)."""

    def __init__(
        self,
        rm: ReplicaManager,
        peers: GrpcPeerCheck,
        coordinator: Callable[[], TransactionCoordinator | None],
    ) -> None:
        self.rm = rm
        self.peers = peers
        self.coordinator = coordinator

    async def VerifyPartitionsInTxn(  # noqa: N802
        self, request: Any, context: Any
    ) -> txn_pb2.VerifyPartitionsInTxnResponse:
        def failed(code: ErrorCode) -> txn_pb2.VerifyPartitionsInTxnResponse:
            return txn_pb2.VerifyPartitionsInTxnResponse(error_code=error_to_wire(code))

        if not self.peers.may_cluster(context, AclOperation.CLUSTER_ACTION):
            return failed(E.CLUSTER_AUTHORIZATION_FAILED)
        coordinator = self.coordinator()
        if coordinator is None:
            return failed(E.COORDINATOR_NOT_AVAILABLE)
        return await guarded(self.rm, "VerifyPartitionsInTxn", self._answer(coordinator, request),
                             failed)  # fmt: skip

    async def _answer(
        self, coordinator: TransactionCoordinator, request: Any
    ) -> txn_pb2.VerifyPartitionsInTxnResponse:
        pairs = [(t.name, p) for t in request.topics for p in t.partition_indexes]
        answers = coordinator.verify_partitions(
            request.transactional_id, request.producer_id, request.producer_epoch, pairs
        )
        response = txn_pb2.VerifyPartitionsInTxnResponse()
        for t in request.topics:
            topic = response.topics.add(name=t.name)
            for p in t.partition_indexes:
                code = answers.get((t.name, p), E.UNKNOWN_SERVER_ERROR)
                topic.partitions.add(partition_index=p, error_code=error_to_wire(code))
        return response
