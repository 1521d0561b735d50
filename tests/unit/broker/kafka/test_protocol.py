"""The Kafka listener's requests and answers: headers peeked, bodies decoded with kafka-python's
classes, an ApiVersions request of an unknown version answered with UNSUPPORTED_VERSION (v0)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kafka.protocol.api_key import ApiKey
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
from kafka.protocol.metadata.metadata import MetadataRequest

from broker.kafka.connection import KafkaConnection
from broker.kafka.errors import CloseConnection
from broker.kafka.protocol import APIS, MalformedRequest, decode_request, peek_header
from minibroker.core.errors import ErrorCode
from minibroker.core.listeners import Endpoint, pick, speaks_kafka


def encoded(request: Any, version: int, correlation_id: int = 9) -> bytes:
    request.API_VERSION = version
    request.with_header(correlation_id=correlation_id, client_id="test")
    return bytes(request.encode(header=True))


def connection() -> KafkaConnection:
    class Writer:
        def get_extra_info(self, name: str) -> Any:
            return ("127.0.0.1", 1)

    return KafkaConnection(None, None, Writer(), 1000, 1.0)  # type: ignore[arg-type]


def test_a_header_is_peeked_and_the_body_decoded_at_its_version() -> None:
    payload = encoded(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
    start = peek_header(payload)
    assert (start.api_key, start.api_version, start.correlation_id) == (3, 9, 9)
    request = decode_request(APIS[ApiKey.Metadata], 9, payload)
    assert request.topics is None and request.header.client_id == "test"


def test_a_body_that_does_not_parse_is_malformed() -> None:
    payload = encoded(MetadataRequest(topics=None, allow_auto_topic_creation=False), 9)
    with pytest.raises(MalformedRequest, match="Metadata v9 does not parse"):
        decode_request(APIS[ApiKey.Metadata], 9, payload[:-3] + b"\xff\xff\xff")
    with pytest.raises(MalformedRequest, match="shorter than its header"):
        peek_header(b"\x00\x03")


def test_an_unknown_apiversions_version_gets_unsupported_version_as_v0() -> None:
    payload = (18).to_bytes(2, "big") + (99).to_bytes(2, "big") + (5).to_bytes(4, "big")
    answer = asyncio.run(connection().answer(payload))
    assert answer is not None
    response = ApiVersionsResponse.decode(answer, version=0, header=True, framed=True)
    assert response.error_code == ErrorCode.UNSUPPORTED_VERSION
    assert response.header.correlation_id == 5
    keys = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert keys[ApiKey.Produce] == (3, 8) and keys[ApiKey.Fetch] == (4, 11)


@pytest.mark.parametrize(
    ("api_key", "version", "why"),
    [(77, 0, "API key 77 is not served"), (0, 2, "Produce v2 is not served")],
)
def test_other_unknown_apis_and_versions_close_the_connection_saying_why(
    api_key: int, version: int, why: str
) -> None:
    payload = api_key.to_bytes(2, "big") + version.to_bytes(2, "big") + bytes(8)
    with pytest.raises(CloseConnection, match=why):
        asyncio.run(connection().answer(payload))


def test_apiversions_v3_round_trips_through_the_clients_own_classes() -> None:
    payload = encoded(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3)
    assert decode_request(APIS[ApiKey.ApiVersions], 3, payload).client_software_name == "x"


def test_kafka_listeners_are_named_kafka_and_grpc_clients_never_pick_them() -> None:
    assert speaks_kafka("KAFKA") and speaks_kafka("KAFKA_EXTERNAL")
    assert not speaks_kafka("PLAINTEXT") and not speaks_kafka("KAFKAESQUE")
    eps = [Endpoint("KAFKA", "h", 1), Endpoint("INTERNAL", "h", 2)]
    assert pick(eps) == eps[1]
    assert pick(eps, "KAFKA") == eps[0]
    assert pick([Endpoint("KAFKA", "h", 1)]) is None


def test_end_txn_v5_is_offered_only_with_transaction_version_2() -> None:
    # KIP-890 part 2: Kafka 4.0 advertises EndTxn v5 once transaction.version is 2; a Kafka
    # 2.6-like broker (transaction.version 1) offers 0-1, so no client asks for an epoch bump.
    from broker.kafka.handlers_meta import api_versions

    def end_txn_max(tv: int) -> int:
        keys = api_versions(transaction_version=tv).api_keys
        return next(int(k.max_version) for k in keys if k.api_key == ApiKey.EndTxn)

    assert (end_txn_max(1), end_txn_max(2)) == (1, 5)
    assert APIS[ApiKey.EndTxn].supports(5)  # served either way: bumping needs the setting
