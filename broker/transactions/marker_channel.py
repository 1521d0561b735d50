"""A decided transaction's markers sent to the leaders of its partitions (Kafka's
TransactionMarkerChannelManager): one WriteTxnMarkers call per leader per round, this broker's
own partitions appended directly; what each answer means is markers.py's rule. A partition whose
topic was deleted is dropped (Kafka removes it from the transaction); one without a leader
waits for the next round."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

import grpc

from broker.replica_manager import ReplicaManager
from broker.transactions.markers import PendingMarkers
from broker.transactions.peer_channels import PeerChannels
from minibroker.core.control_records import Marker
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.rpc import txn_pb2, txn_pb2_grpc
from minibroker.runtime import logging as slog
from minibroker.runtime.wire import error_from_wire

# KafkaApis appends markers with the request timeout; the channel waits a little longer.
MARKER_TIMEOUT_MS = 30_000
Tp = tuple[str, int]


class MarkerChannel:
    def __init__(self, rm: ReplicaManager) -> None:
        self.rm = rm
        self.backoff_s = rm.settings.get_int("minibroker.txn.marker.retry.backoff.ms") / 1000
        self.peers = PeerChannels()

    async def send(self, pending: PendingMarkers, still_coordinator: Callable[[], bool]) -> bool:
        """Rounds until every partition has its marker (True), or the transaction's producer
        or coordinator moved on, or this broker no longer coordinates it (False)."""
        while not pending.complete and not pending.cancelled:
            if not still_coordinator():
                return False
            topics = set(self.rm.metadata.topics())
            pending.remaining = {tp for tp in pending.remaining if tp[0] in topics}
            rounds = pending.requests(self._leader_of)
            answers = await asyncio.gather(
                *(self._write(leader, pending, tps) for leader, tps in rounds.items())
            )
            for errors in answers:
                for note in pending.answered(errors):
                    slog.event("txn_marker_unexpected", logging.WARNING, note=note)
            if not pending.complete and not pending.cancelled:
                await asyncio.sleep(self.backoff_s)
        return pending.complete

    def _leader_of(self, tp: Tp) -> int | None:
        state = self.rm.metadata.partitions.get(TopicPartition(*tp))
        if state is None or state.leader < 0 or state.leader not in self.rm.metadata.brokers:
            return None
        return state.leader

    async def _write(
        self, leader: int, pending: PendingMarkers, tps: list[Tp]
    ) -> dict[Tp, ErrorCode]:
        marker = Marker(pending.commit, pending.coordinator_epoch)
        if leader == self.rm.broker_id:
            try:
                errors = await self.rm.appends.append_markers(
                    MARKER_TIMEOUT_MS, pending.producer_id, pending.producer_epoch, marker,
                    [TopicPartition(*tp) for tp in tps],
                )  # fmt: skip
            except Exception as exc:  # a storage error: sent again next round
                slog.event("txn_marker_send_failed", logging.WARNING, broker=leader,
                           error=repr(exc))  # fmt: skip
                return dict.fromkeys(tps, ErrorCode.KAFKA_STORAGE_ERROR)
            return {(tp.topic, tp.partition): e for tp, e in errors.items()}
        broker = self.rm.metadata.brokers.get(leader)
        if broker is None:
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        request = txn_pb2.WriteTxnMarkersRequest()
        entry = request.markers.add(
            producer_id=pending.producer_id,
            producer_epoch=pending.producer_epoch,
            transaction_result=pending.commit,
            coordinator_epoch=pending.coordinator_epoch,
        )
        by_topic: dict[str, list[int]] = {}
        for topic, partition in tps:
            by_topic.setdefault(topic, []).append(partition)
        for topic, partitions in sorted(by_topic.items()):
            entry.topics.add(name=topic, partition_indexes=partitions)
        stub = txn_pb2_grpc.TxnMarkersStub(self.peers.get(f"{broker.host}:{broker.port}"))
        try:
            response = await stub.WriteTxnMarkers(request, timeout=MARKER_TIMEOUT_MS / 1000 + 5)
        except grpc.aio.AioRpcError as exc:
            slog.event(
                "txn_marker_send_failed", logging.WARNING, broker=leader, error=exc.code().name
            )
            return dict.fromkeys(tps, ErrorCode.NOT_LEADER_OR_FOLLOWER)  # sent again
        out: dict[Tp, ErrorCode] = {}
        for result in response.markers:
            for t in result.topics:
                for p in t.partitions:
                    out[(t.name, p.partition_index)] = error_from_wire(p.error_code)
        return out

    async def close(self) -> None:
        await self.peers.close()
