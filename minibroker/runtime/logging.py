"""Structured logs: one JSON object per line on stderr, one line per event.

Every line has `ts` (epoch ms), `level`, `proc` (e.g. "broker-1") and `event`; the rest are the
event's fields. Library logs (kazoo, grpc) go through the same formatter with event "log".
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

_PROC = "minibroker"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "fields", None)
        line: dict[str, Any] = {
            "ts": int(record.created * 1000),
            "level": record.levelname,
            "proc": _PROC,
        }
        if fields is not None:
            line["event"] = record.getMessage()
            line.update(fields)
        else:
            line["event"] = "log"
            line["logger"] = record.name
            line["msg"] = record.getMessage()
        if record.exc_info:
            line["exc"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, separators=(",", ":"))


def setup(proc: str, level: int = logging.INFO) -> None:
    """Route all logging of this process to stderr as JSON lines tagged with `proc`."""
    global _PROC
    _PROC = proc
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # kazoo logs every reconnect attempt at INFO; warnings are what matter.
    logging.getLogger("kazoo").setLevel(logging.WARNING)


_events = logging.getLogger("minibroker.events")


def event(name: str, level: int = logging.INFO, *, exc_info: bool = False, **fields: Any) -> None:
    """Log one structured event line: `event("controller_elected", epoch=3)`."""
    _events.log(level, name, extra={"fields": fields}, exc_info=exc_info)


def parse_line(line: str) -> dict[str, Any] | None:
    """The event of one log line, or None for a line that is not ours (e.g. a JVM's)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) and "event" in obj else None
