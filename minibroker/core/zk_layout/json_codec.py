"""The JSON conventions of Kafka's znodes (reference §1.1): compact encoding, typed look-ups by
key name, and the error a znode that is not what Kafka writes raises."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class ZNodeFormatError(ValueError):
    """A znode's bytes are not what Kafka writes there."""


def dumps(obj: object) -> bytes:
    # Jackson's writeValueAsBytes: compact, UTF-8, no escaping of non-ASCII.
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def loads(data: bytes | None, what: str) -> dict[str, Any]:
    if not data:
        raise ZNodeFormatError(f"{what}: empty znode")
    try:
        obj = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ZNodeFormatError(f"{what}: not JSON: {data[:80]!r}") from exc
    if not isinstance(obj, dict):
        raise ZNodeFormatError(f"{what}: expected a JSON object, got {type(obj).__name__}")
    return obj


def int_field(obj: Mapping[str, Any], key: str, what: str) -> int:
    value = obj.get(key)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ZNodeFormatError(f"{what}: field {key!r} must be an integer, got {value!r}")
    return value


def int_list(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        raise ZNodeFormatError(f"{what}: expected a list of integers, got {value!r}")
    return tuple(value)


def timestamp_field(obj: Mapping[str, Any], what: str) -> int:
    # Kafka writes timestamps as JSON strings of epoch milliseconds (reference §1.1).
    raw = obj.get("timestamp")
    try:
        return int(raw) if raw is not None else -1
    except (TypeError, ValueError) as exc:
        raise ZNodeFormatError(f"{what}: bad timestamp {raw!r}") from exc


def describe(data: bytes | None) -> str:
    """A human-readable rendering of a znode's data for `minibroker zk tree`."""
    if data is None or data == b"":
        return ""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.hex()
