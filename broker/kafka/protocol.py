"""The Kafka APIs this listener answers, at which versions, and their message classes
(kafka-python's, generated from Kafka's own JSON schemas: they decode requests and encode
responses, flexible versions included). Ranges are Kafka 2.6's, cut to what minibroker serves:
record batches of magic 2 only (Produce v3+, Fetch v4+), as its log holds nothing else."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

from kafka.protocol.admin.acl import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from kafka.protocol.admin.cluster import DescribeLogDirsRequest, DescribeLogDirsResponse
from kafka.protocol.admin.configs import (
    AlterConfigsRequest,
    AlterConfigsResponse,
    DescribeConfigsRequest,
    DescribeConfigsResponse,
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from kafka.protocol.admin.groups import (
    DeleteGroupsRequest,
    DeleteGroupsResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    ListGroupsRequest,
    ListGroupsResponse,
)
from kafka.protocol.admin.topics import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteRecordsRequest,
    DeleteRecordsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
    ElectLeadersRequest,
    ElectLeadersResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)
from kafka.protocol.api_key import ApiKey
from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
from kafka.protocol.consumer.group import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)
from kafka.protocol.consumer.offsets import (
    ListOffsetsRequest,
    ListOffsetsResponse,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.find_coordinator import (
    FindCoordinatorRequest,
    FindCoordinatorResponse,
)
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.producer.transaction import (
    AddOffsetsToTxnRequest,
    AddOffsetsToTxnResponse,
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse,
    EndTxnRequest,
    EndTxnResponse,
    InitProducerIdRequest,
    InitProducerIdResponse,
    TxnOffsetCommitRequest,
    TxnOffsetCommitResponse,
)
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

# api_key (int16), api_version (int16), correlation_id (int32): the start of every header.
HEADER_START = struct.Struct(">hhi")


@dataclass(frozen=True)
class Api:
    key: ApiKey
    request: Any  # a kafka-python ApiMessage class
    response: Any
    min_version: int
    max_version: int

    def supports(self, version: int) -> bool:
        return self.min_version <= version <= self.max_version


APIS: dict[int, Api] = {
    a.key: a
    for a in (
        Api(ApiKey.Produce, ProduceRequest, ProduceResponse, 3, 8),
        Api(ApiKey.Fetch, FetchRequest, FetchResponse, 4, 11),
        Api(ApiKey.ListOffsets, ListOffsetsRequest, ListOffsetsResponse, 1, 5),
        Api(ApiKey.Metadata, MetadataRequest, MetadataResponse, 0, 9),
        Api(ApiKey.ApiVersions, ApiVersionsRequest, ApiVersionsResponse, 0, 3),
        Api(ApiKey.InitProducerId, InitProducerIdRequest, InitProducerIdResponse, 0, 3),
        Api(ApiKey.AddPartitionsToTxn, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 1),
        Api(ApiKey.AddOffsetsToTxn, AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 1),
        # v2-v4 answer as v1; v5 bumps the epoch with transaction.version 2 (KIP-890 part 2),
        # and is advertised only then (handlers_meta.api_versions).
        Api(ApiKey.EndTxn, EndTxnRequest, EndTxnResponse, 0, 5),
        Api(ApiKey.TxnOffsetCommit, TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 3),
        Api(ApiKey.FindCoordinator, FindCoordinatorRequest, FindCoordinatorResponse, 0, 3),
        Api(ApiKey.JoinGroup, JoinGroupRequest, JoinGroupResponse, 0, 7),
        Api(ApiKey.SyncGroup, SyncGroupRequest, SyncGroupResponse, 0, 5),
        Api(ApiKey.Heartbeat, HeartbeatRequest, HeartbeatResponse, 0, 4),
        Api(ApiKey.LeaveGroup, LeaveGroupRequest, LeaveGroupResponse, 0, 4),
        Api(ApiKey.OffsetCommit, OffsetCommitRequest, OffsetCommitResponse, 2, 8),
        Api(ApiKey.OffsetFetch, OffsetFetchRequest, OffsetFetchResponse, 1, 7),
        Api(ApiKey.CreateTopics, CreateTopicsRequest, CreateTopicsResponse, 0, 5),
        Api(ApiKey.DeleteTopics, DeleteTopicsRequest, DeleteTopicsResponse, 0, 4),
        Api(ApiKey.ListGroups, ListGroupsRequest, ListGroupsResponse, 0, 3),
        Api(ApiKey.DescribeGroups, DescribeGroupsRequest, DescribeGroupsResponse, 0, 5),
        Api(ApiKey.DeleteGroups, DeleteGroupsRequest, DeleteGroupsResponse, 0, 2),
        # Kafka 2.6 serves 0-1; kafka-python's classes read 1 and up.
        Api(ApiKey.DescribeLogDirs, DescribeLogDirsRequest, DescribeLogDirsResponse, 1, 1),
        Api(ApiKey.DeleteRecords, DeleteRecordsRequest, DeleteRecordsResponse, 0, 2),
        Api(ApiKey.CreatePartitions, CreatePartitionsRequest, CreatePartitionsResponse, 0, 2),
        Api(ApiKey.ElectLeaders, ElectLeadersRequest, ElectLeadersResponse, 0, 2),
        Api(
            ApiKey.AlterPartitionReassignments,
            AlterPartitionReassignmentsRequest,
            AlterPartitionReassignmentsResponse,
            0,
            0,
        ),
        Api(
            ApiKey.ListPartitionReassignments,
            ListPartitionReassignmentsRequest,
            ListPartitionReassignmentsResponse,
            0,
            0,
        ),
        Api(ApiKey.DescribeConfigs, DescribeConfigsRequest, DescribeConfigsResponse, 0, 3),
        Api(ApiKey.AlterConfigs, AlterConfigsRequest, AlterConfigsResponse, 0, 1),
        Api(
            ApiKey.IncrementalAlterConfigs,
            IncrementalAlterConfigsRequest,
            IncrementalAlterConfigsResponse,
            0,
            1,
        ),
        Api(ApiKey.SaslHandshake, SaslHandshakeRequest, SaslHandshakeResponse, 0, 1),
        Api(ApiKey.SaslAuthenticate, SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2),
        Api(ApiKey.CreateAcls, CreateAclsRequest, CreateAclsResponse, 0, 2),
        Api(ApiKey.DescribeAcls, DescribeAclsRequest, DescribeAclsResponse, 0, 2),
        Api(ApiKey.DeleteAcls, DeleteAclsRequest, DeleteAclsResponse, 0, 2),
        Api(
            ApiKey.OffsetForLeaderEpoch,
            OffsetForLeaderEpochRequest,
            OffsetForLeaderEpochResponse,
            0,
            3,
        ),
    )
}


@dataclass(frozen=True)
class HeaderStart:
    api_key: int
    api_version: int
    correlation_id: int


class MalformedRequest(Exception):
    """A request that cannot be read; the message says why (the connection closes)."""


def peek_header(payload: bytes) -> HeaderStart:
    """The key, version and correlation id every request begins with."""
    if len(payload) < HEADER_START.size:
        raise MalformedRequest(f"a request of {len(payload)} bytes is shorter than its header")
    return HeaderStart(*HEADER_START.unpack_from(payload))


def decode_request(api: Api, version: int, payload: bytes) -> Any:
    """The request (its header included, as `.header`); MalformedRequest if it does not parse."""
    try:
        return api.request.decode(payload, version=version, header=True)
    except Exception as exc:  # the library raises whatever its reader hit: all mean "malformed"
        raise MalformedRequest(
            f"{api.key.name} v{version} does not parse: {type(exc).__name__}: {exc}"
        ) from None


def encode_response(api: Api, version: int, correlation_id: int, response: Any) -> bytes:
    """The framed response (size, header, body)."""
    response.API_VERSION = version
    response.with_header(correlation_id=correlation_id)
    return bytes(response.encode(header=True, framed=True))
