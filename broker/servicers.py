"""The Broker gRPC service: protobuf in, validated internal requests to the replica manager,
protobuf out (the controller's requests are control_servicer.py).

Every RPC answers with Kafka error codes; nothing raises across gRPC. An unexpected exception
is logged and answered with UNKNOWN_SERVER_ERROR, and the broker keeps serving.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from broker import auto_create, offset_reads
from broker.delete_records import MAX_TIMEOUT_MS as MAX_DELETE_RECORDS_TIMEOUT_MS
from broker.fetch.handling import MAX_WAIT_MS, FetchCall, handle_fetch
from broker.fetch.session_cache import FINAL_EPOCH
from broker.grpc_answers import (
    fetch_failed,
    fetch_refusal,
    produce_response,
    produce_tps,
    replica_description,
)
from broker.replica_manager import ReplicaManager
from broker.request_handling import guarded, opt_field
from broker.security.authorizer import BrokerAuthorizer
from broker.security.grpc_peers import GrpcPeerCheck
from broker.types import (
    CONSUMER_REPLICA_ID,
    FetchPartitionRequest,
)
from minibroker.core.errors import ErrorCode
from minibroker.core.security.acl import AclOperation
from minibroker.core.types import NO_LEADER, TopicPartition
from minibroker.rpc import broker_pb2, broker_pb2_grpc
from minibroker.runtime.wire import error_to_wire

DEBUG_REPLICA_ID = -2


DENIED = error_to_wire(ErrorCode.TOPIC_AUTHORIZATION_FAILED)


class BrokerServicer(broker_pb2_grpc.BrokerServicer):  # type: ignore[misc]
    """The Broker service on one listener: Metadata answers with that listener's endpoints."""

    def __init__(
        self, rm: ReplicaManager, listener: str = "PLAINTEXT", peers: GrpcPeerCheck | None = None
    ) -> None:
        self.rm = rm
        self.listener = listener
        self.peers = peers or GrpcPeerCheck(False, BrokerAuthorizer(None, None), listener)
        # Kafka caps every fetch at the broker's fetch.max.bytes, whatever it asks for.
        self.fetch_max_bytes = rm.settings.get_int("fetch.max.bytes")

    # ---- Produce ---------------------------------------------------------------------------

    async def Produce(self, request: Any, context: Any) -> broker_pb2.ProduceResponse:  # noqa: N802
        def failed(code: ErrorCode) -> broker_pb2.ProduceResponse:
            return produce_response({tp: (code, -1, -1, "") for tp in produce_tps(request)})

        return await guarded(self.rm, "Produce", self._produce(request, context), failed)

    async def _produce(self, request: Any, context: Any) -> broker_pb2.ProduceResponse:
        batches: dict[TopicPartition, bytes] = {}
        for t in request.topics:
            for p in t.partitions:
                batches[TopicPartition(t.name, p.partition_index)] = bytes(p.records)
        txn_id = request.transactional_id if request.HasField("transactional_id") else None
        if txn_id and not self.peers.may_write_transactional_id(context, txn_id):
            refused = ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED  # the whole request
            return produce_response({tp: (refused, -1, -1, "") for tp in batches})
        writable = self.peers.topics_allowed(
            context, AclOperation.WRITE, {tp.topic for tp in batches}
        )
        denied = ErrorCode.TOPIC_AUTHORIZATION_FAILED
        out = {tp: (denied, -1, -1, "") for tp in batches if tp.topic not in writable}
        timeout_ms = max(0, min(int(request.timeout_ms), 10 * MAX_WAIT_MS))
        allowed = {tp: b for tp, b in batches.items() if tp.topic in writable}
        if allowed:
            results = await self.rm.append_records(
                int(request.acks), timeout_ms, allowed, transactional_id=txn_id or None
            )
            out.update(
                {
                    tp: (r.error, r.base_offset, r.log_start_offset, r.message)
                    for tp, r in results.items()
                }
            )
        return produce_response(out)

    # ---- Fetch -----------------------------------------------------------------------------

    async def Fetch(self, request: Any, context: Any) -> broker_pb2.FetchResponse:  # noqa: N802
        return await guarded(self.rm, "Fetch", self._fetch(request, context), fetch_failed)

    async def FetchStream(  # noqa: N802
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[broker_pb2.FetchResponse]:
        """Fetch, one answer per request on a follower's long-lived stream."""
        async for request in requests:
            yield await guarded(self.rm, "Fetch", self._fetch(request, context), fetch_failed)

    def _fetch_refused(self, request: Any, context: Any) -> set[str]:
        """The topics of this fetch the caller may not read: every one for a follower fetch
        without its broker's certificate (TOPIC_AUTHORIZATION_FAILED per partition, as Kafka
        answers a follower without CLUSTER_ACTION), else those without READ."""
        topics = {t.topic for t in request.topics}
        replica_id = opt_field(request, "replica_id", CONSUMER_REPLICA_ID)
        if replica_id >= 0:
            return set() if self.peers.follower(context, replica_id) else topics
        return topics - self.peers.topics_allowed(context, AclOperation.READ, topics)

    async def _fetch(self, request: Any, context: Any) -> broker_pb2.FetchResponse:
        refused = self._fetch_refused(request, context)
        if refused == {t.topic for t in request.topics} and refused:
            return fetch_refusal(request, refused)
        parts = []
        for t in request.topics:
            if t.topic in refused:
                continue
            for p in t.partitions:
                parts.append(
                    FetchPartitionRequest(
                        tp=TopicPartition(t.topic, p.partition),
                        fetch_offset=int(p.fetch_offset),
                        max_bytes=max(0, int(p.partition_max_bytes)),
                        current_leader_epoch=opt_field(p, "current_leader_epoch", -1),
                        log_start_offset=opt_field(p, "log_start_offset", -1),
                    )
                )
        call = FetchCall(
            replica_id=opt_field(request, "replica_id", CONSUMER_REPLICA_ID),
            max_wait_ms=int(request.max_wait_ms),
            min_bytes=int(request.min_bytes),
            max_bytes=int(request.max_bytes),
            session_id=int(request.session_id),
            # Incremental fetch sessions (KIP-227); a request without an epoch has none.
            session_epoch=opt_field(request, "session_epoch", FINAL_EPOCH),
            partitions=parts,
            isolation_level=int(request.isolation_level),
            forgotten=[
                TopicPartition(f.topic, p)
                for f in request.forgotten_topics_data
                for p in f.partitions
            ],
        )
        answer = await handle_fetch(self.rm, call, self.fetch_max_bytes)
        if isinstance(answer, ErrorCode):
            return broker_pb2.FetchResponse(error_code=error_to_wire(answer))
        response = broker_pb2.FetchResponse(session_id=answer.session_id)
        by_topic: dict[str, Any] = {}
        for tp, r in answer.partitions:
            topic = by_topic.get(tp.topic)
            if topic is None:
                topic = by_topic[tp.topic] = response.responses.add(topic=tp.topic)
            topic.partitions.add(
                partition_index=tp.partition,
                error_code=error_to_wire(r.error),
                high_watermark=r.high_watermark,
                last_stable_offset=r.last_stable_offset,
                log_start_offset=r.log_start_offset,
                aborted_transactions=[
                    broker_pb2.AbortedTransaction(producer_id=pid, first_offset=first)
                    for pid, first in r.aborted or ()
                ],
                preferred_read_replica=-1,
                records=r.records,
            )
        if refused:
            for topic in fetch_refusal(request, refused).responses:
                if topic.topic in refused:
                    response.responses.append(topic)
        return response

    # ---- ListOffsets, OffsetsForLeaderEpoch, Metadata, DescribeBroker ----------------------

    async def ListOffsets(self, request: Any, context: Any) -> broker_pb2.ListOffsetsResponse:  # noqa: N802
        async def handle() -> broker_pb2.ListOffsetsResponse:
            replica_id = opt_field(request, "replica_id", CONSUMER_REPLICA_ID)
            response = broker_pb2.ListOffsetsResponse()
            described = self.peers.topics_allowed(
                context, AclOperation.DESCRIBE, {t.name for t in request.topics}
            )
            for t in request.topics:
                out = response.topics.add(name=t.name)
                for p in t.partitions:
                    if t.name not in described:
                        out.partitions.add(
                            partition_index=p.partition_index, error_code=DENIED,
                            timestamp=-1, offset=-1, leader_epoch=-1,
                        )  # fmt: skip
                        continue
                    r = offset_reads.list_offset(
                        self.rm.partitions,
                        TopicPartition(t.name, p.partition_index),
                        int(p.timestamp),
                        opt_field(p, "current_leader_epoch", -1),
                        replica_id,
                        int(request.isolation_level),
                    )
                    out.partitions.add(
                        partition_index=p.partition_index,
                        error_code=error_to_wire(r.error),
                        timestamp=r.timestamp,
                        offset=r.offset,
                        leader_epoch=r.leader_epoch,
                    )
            return response

        def failed(code: ErrorCode) -> broker_pb2.ListOffsetsResponse:
            return broker_pb2.ListOffsetsResponse()

        return await guarded(self.rm, "ListOffsets", handle(), failed)

    async def OffsetsForLeaderEpoch(  # noqa: N802
        self, request: Any, context: Any
    ) -> broker_pb2.OffsetsForLeaderEpochResponse:
        async def handle() -> broker_pb2.OffsetsForLeaderEpochResponse:
            response = broker_pb2.OffsetsForLeaderEpochResponse()
            described = self.peers.topics_allowed(
                context, AclOperation.DESCRIBE, {t.topic for t in request.topics}
            )
            for t in request.topics:
                out = response.topics.add(topic=t.topic)
                for p in t.partitions:
                    if t.topic not in described:
                        out.partitions.add(error_code=DENIED, partition=p.partition,
                                           leader_epoch=-1, end_offset=-1)  # fmt: skip
                        continue
                    r = offset_reads.last_offset_for_leader_epoch(
                        self.rm.partitions,
                        TopicPartition(t.topic, p.partition),
                        int(p.leader_epoch),
                        opt_field(p, "current_leader_epoch", -1),
                    )
                    out.partitions.add(
                        error_code=error_to_wire(r.error),
                        partition=p.partition,
                        leader_epoch=r.leader_epoch,
                        end_offset=r.end_offset,
                    )
            return response

        def failed(code: ErrorCode) -> broker_pb2.OffsetsForLeaderEpochResponse:
            return broker_pb2.OffsetsForLeaderEpochResponse()

        return await guarded(self.rm, "OffsetsForLeaderEpoch", handle(), failed)

    async def DeleteRecords(  # noqa: N802
        self, request: Any, context: Any
    ) -> broker_pb2.DeleteRecordsResponse:
        async def handle() -> broker_pb2.DeleteRecordsResponse:
            offsets = {
                TopicPartition(t.name, p.partition_index): int(p.offset)
                for t in request.topics
                for p in t.partitions
            }
            timeout_ms = max(0, min(int(request.timeout_ms), MAX_DELETE_RECORDS_TIMEOUT_MS))
            deletable = self.peers.topics_allowed(
                context, AclOperation.DELETE, {tp.topic for tp in offsets}
            )
            results = await self.rm.deletion.delete_records(offsets, timeout_ms, deletable)
            response = broker_pb2.DeleteRecordsResponse()
            by_topic: dict[str, Any] = {}
            for tp, r in results.items():
                if tp.topic not in by_topic:
                    by_topic[tp.topic] = response.topics.add(name=tp.topic)
                by_topic[tp.topic].partitions.add(
                    partition_index=tp.partition, low_watermark=r.low_watermark,
                    error_code=error_to_wire(r.error), error_message=r.message,
                )  # fmt: skip
            return response

        def failed(code: ErrorCode) -> broker_pb2.DeleteRecordsResponse:
            return broker_pb2.DeleteRecordsResponse()

        return await guarded(self.rm, "DeleteRecords", handle(), failed)

    async def Metadata(self, request: Any, context: Any) -> broker_pb2.MetadataResponse:  # noqa: N802
        async def handle() -> broker_pb2.MetadataResponse:
            cache = self.rm.metadata
            response = broker_pb2.MetadataResponse(controller_id=cache.controller_id)
            for b in cache.brokers.values():
                # A broker without this listener is left out, as Kafka does (KIP-103).
                ep = b.endpoint_for(self.listener)
                if ep is not None:
                    response.brokers.add(node_id=b.broker_id, host=ep.host, port=ep.port)
            named = list(request.topics)
            wanted = named or cache.topics()
            # DESCRIBE on each topic: a listing leaves the others out, a named one is refused;
            # creating a missing one needs CREATE (KafkaApis.handleTopicMetadataRequest).
            described = self.peers.topics_allowed(
                context, AclOperation.DESCRIBE, set(wanted), log=bool(named)
            )
            by_topic = cache.partitions_by_topic(described if named else None)
            absent = {n for n in named if n in described and n not in by_topic}
            creatable = absent
            if absent and not self.peers.may_cluster(context, AclOperation.CREATE):
                creatable = self.peers.topics_allowed(context, AclOperation.CREATE, absent)
            created = await auto_create.maybe_create(
                self.rm, sorted(creatable), bool(request.allow_auto_topic_creation)
            )
            for topic in wanted:
                if topic not in described or topic in absent - creatable:
                    if named:
                        response.topics.add(name=topic, error_code=DENIED)
                    continue
                partitions = by_topic.get(topic, [])
                t = response.topics.add(name=topic)
                if not partitions:
                    missing = created.get(topic, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                    t.error_code = error_to_wire(missing)
                for tp, s in partitions:
                    error = (
                        ErrorCode.LEADER_NOT_AVAILABLE
                        if s.leader == NO_LEADER
                        else (ErrorCode.NONE)
                    )
                    t.partitions.add(
                        error_code=error_to_wire(error),
                        partition_index=tp.partition,
                        leader_id=s.leader,
                        leader_epoch=s.leader_epoch,
                        replica_nodes=s.replicas,
                        isr_nodes=s.isr,
                        offline_replicas=s.offline_replicas,
                    )
            return response

        def failed(code: ErrorCode) -> broker_pb2.MetadataResponse:
            return broker_pb2.MetadataResponse(controller_id=-1)

        return await guarded(self.rm, "Metadata", handle(), failed)

    async def DescribeBroker(self, request: Any, context: Any) -> broker_pb2.DescribeBrokerResponse:  # noqa: N802
        async def handle() -> broker_pb2.DescribeBrokerResponse:
            rm = self.rm
            if not self.peers.may_cluster(context, AclOperation.DESCRIBE):
                return broker_pb2.DescribeBrokerResponse(
                    error_code=error_to_wire(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                )
            now_ms = rm.now_ms()
            return broker_pb2.DescribeBrokerResponse(
                error_code=error_to_wire(ErrorCode.NONE),
                broker_id=rm.broker_id,
                broker_epoch=rm.broker_epoch,
                zookeeper_connect=rm.settings.get_str("zookeeper.connect"),
                profile=rm.settings.profile,
                config=rm.settings.as_strings(),
                static_config_names=sorted(rm.settings.explicit),
                dynamic_default_config=rm.settings.dynamic[0],
                dynamic_broker_config=rm.settings.dynamic[1],
                leader_replication_byte_rate=rm.quotas.describe()["leader_rate"],
                follower_replication_byte_rate=rm.quotas.describe()["follower_rate"],
                partitions=[
                    replica_description(tp, hosted, now_ms)
                    for tp, hosted in sorted(rm.partitions.items())
                ],
            )

        def failed(code: ErrorCode) -> broker_pb2.DescribeBrokerResponse:
            return broker_pb2.DescribeBrokerResponse(error_code=error_to_wire(code))

        return await guarded(self.rm, "DescribeBroker", handle(), failed)

    # ---- Authenticate (a token for a certificate-less client) -----------------------------

    async def Authenticate(  # noqa: N802
        self, requests: AsyncIterator[Any], context: Any
    ) -> AsyncIterator[broker_pb2.AuthenticateResponse]:
        async for answer in self.peers.authenticate(requests, context):
            yield answer
