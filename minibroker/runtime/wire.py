"""Conversions between protobuf messages and core types: the one door to generated code."""

from __future__ import annotations

from typing import cast

from minibroker.core.errors import ErrorCode
from minibroker.rpc import errors_pb2


def error_to_wire(code: ErrorCode) -> errors_pb2.ErrorCode:
    return cast(errors_pb2.ErrorCode, int(code))


def error_from_wire(value: int) -> ErrorCode:
    """Kafka's code, or UNKNOWN_SERVER_ERROR for a number this version does not know."""
    try:
        return ErrorCode(value)
    except ValueError:
        return ErrorCode.UNKNOWN_SERVER_ERROR
