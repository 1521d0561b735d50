"""ErrorCode (Python) and errors.proto's enum must agree in both directions."""

from __future__ import annotations

from minibroker.core.errors import RETRIABLE, ErrorCode, error_name
from minibroker.rpc import errors_pb2


def test_python_and_proto_error_codes_agree() -> None:
    proto = dict(errors_pb2.ErrorCode.items())
    ours = {e.name: e.value for e in ErrorCode}
    assert ours == proto


def test_kafka_numbers_of_the_replication_errors() -> None:
    # shared/kafka-reference.md §6.8
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER.value == 6
    assert ErrorCode.NOT_ENOUGH_REPLICAS.value == 19
    assert ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND.value == 20
    assert ErrorCode.FENCED_LEADER_EPOCH.value == 74
    assert ErrorCode.STALE_BROKER_EPOCH.value == 77
    assert ErrorCode.OFFSET_NOT_AVAILABLE.value == 78


def test_retriable_set_excludes_fatal_errors() -> None:
    assert ErrorCode.NOT_LEADER_OR_FOLLOWER in RETRIABLE
    assert ErrorCode.INVALID_REQUIRED_ACKS not in RETRIABLE
    assert ErrorCode.MESSAGE_TOO_LARGE not in RETRIABLE


def test_error_name_of_unknown_code() -> None:
    assert error_name(19) == "NOT_ENOUGH_REPLICAS"
    assert error_name(9999) == "UNKNOWN(9999)"
