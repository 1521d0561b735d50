"""Structured logs: one JSON object per line on stderr, one line per event.

Every line has `ts` (epoch ms), `level`, `proc` (e.g. "broker-1") and `event`; the rest are the
event's fields. Library logs (kazoo, grpc) go through the same formatter with event "log".
Each line is also kept in the process's event buffer, which the Events gRPC service serves.
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any

from minibroker.core.event_kinds import is_routine_event
from minibroker.runtime.event_buffer import EventBuffer

_PROC = "minibroker"
_BUFFER = EventBuffer()


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        cached = getattr(record, "minibroker_line", None)
        if cached is not None:
            return str(cached)
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
        text = json.dumps(line, default=str, separators=(",", ":"))
        record.minibroker_line = text  # both handlers format a record: encode it once
        return text


class _BufferHandler(logging.Handler):
    """Keeps each formatted line in the event buffer (after the stderr handler wrote it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = getattr(record, "minibroker_line", None) or self.format(record)
            fields = getattr(record, "fields", None)
            routine = fields is not None and is_routine_event(record.msg, fields.get("cause"))
            _BUFFER.add(int(record.created * 1000), line, routine=routine)
        except Exception:  # logging must never raise into the caller
            self.handleError(record)


def setup(proc: str, level: int = logging.INFO) -> None:
    """Route all logging of this process to stderr as JSON lines tagged with `proc`, and keep
    each line in the event buffer (`event_buffer()`)."""
    global _PROC
    _PROC = proc
    formatter = _JsonFormatter()
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter)
    kept = _BufferHandler()
    kept.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler, kept]
    root.setLevel(level)
    # kazoo logs every reconnect attempt at INFO; warnings are what matter.
    logging.getLogger("kazoo").setLevel(logging.WARNING)


def event_buffer() -> EventBuffer:
    """This process's kept events (filled once `setup` has run)."""
    return _BUFFER


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
