"""How records are printed by `produce --json` and `consume`: bytes as UTF-8 text, one line each."""

from __future__ import annotations

import json
from typing import Any


def text(data: bytes | None) -> str | None:
    """Bytes as text for people and JSON; undecodable bytes become U+FFFD, None stays None."""
    return None if data is None else data.decode("utf-8", errors="replace")


def json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(", ", ": "))


def record_json(
    topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None
) -> str:
    return json_line(
        {
            "topic": topic,
            "partition": partition,
            "offset": offset,
            "key": text(key),
            "value": text(value),
        }
    )
