"""One timeline of a scenario run: the faults it injected, what ZooKeeper recorded, the
processes' own events and the checker's notes, each with its time; rendered relative to the
start. Appended from several threads (the list append is atomic), read once at the end.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any

from minibroker.core.event_kinds import HW_MOVES, is_routine_event
from minibroker.runtime.clock import now_ms

Event = dict[str, Any]
EventText = Callable[[Event], str]

# Events that are the processes' routine bookkeeping, not the replication story: per-request
# HW moves, control requests, start-up configuration. Counted, but left out of the timeline.
ROUTINE_EVENTS = frozenset(
    {
        "request_sent",
        "metadata_updated",
        "log_opened",
        "broker_config",
        "controller_config",
        "broker_listening",
        "controller_listening",
        "follower_fetch",
        "append",
        "log",
        "hw_checkpoint_written",
    }
)
REPEAT_WINDOW_MS = 3000


def is_routine(event: Event) -> bool:
    name = event.get("event")
    if name in HW_MOVES:
        return is_routine_event(name, event.get("cause"))
    if name == "follower_truncation_checked":
        return event.get("from_offset") == event.get("to_offset")
    return name in ROUTINE_EVENTS


def fields_text(event: Event) -> str:
    """`key=value` for every field but the fixed ones (the default event text)."""
    fixed = ("ts", "level", "proc", "event")
    return " ".join(
        f"{k}={v if isinstance(v, str) else json.dumps(v)}"
        for k, v in event.items()
        if k not in fixed
    )


@dataclass(frozen=True)
class Entry:
    """One line: `kind` is fault | zk | event | check | note; `who` the process or source."""

    ts_ms: int
    kind: str
    who: str
    what: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


class Timeline:
    """Entries from every source; `event_text` renders a process event's sentence; `echo`
    gets the rendered line of every fault, check and note as it is added (live progress)."""

    def __init__(
        self,
        start_ms: int | None = None,
        event_text: EventText = fields_text,
        echo: Callable[[str], None] | None = None,
    ) -> None:
        self.start_ms = now_ms() if start_ms is None else start_ms
        self.event_text = event_text
        self.echo = echo
        self.entries: list[Entry] = []
        self.routine_events = 0

    def add(
        self, kind: str, who: str, what: str, text: str, ts_ms: int | None = None, **data: Any
    ) -> Entry:
        entry = Entry(now_ms() if ts_ms is None else ts_ms, kind, who, what, text, data)
        self.entries.append(entry)
        if self.echo is not None and kind in ("fault", "check", "note"):
            self.echo(self.line(entry))
        return entry

    def fault(self, what: str, target: str, text: str) -> Entry:
        return self.add("fault", target, what, text)

    def note(self, text: str, **data: Any) -> Entry:
        return self.add("note", "checker", "note", text, **data)

    def event(self, event: Event) -> None:
        """A process's event (from its Events stream), unless it is routine or from before
        the run (the processes' start-up)."""
        ts = int(event.get("ts", now_ms()))
        if is_routine(event) or ts < self.start_ms:
            self.routine_events += 1
            return
        name = str(event.get("event", "?"))
        self.add("event", str(event.get("proc", "?")), name, self.event_text(event), ts, **event)

    def add_missed(self, events: Iterable[Event]) -> int:
        """Events from the processes' log files that the live streams did not deliver (those
        logged just before a kill, or while a stream reconnected); how many were new."""
        seen = {(e.who, e.ts_ms, e.what) for e in self.entries if e.kind == "event"}
        added = 0
        for event in events:
            key = (str(event.get("proc", "?")), int(event.get("ts", 0)), str(event.get("event")))
            if key not in seen and not is_routine(event) and key[1] >= self.start_ms:
                seen.add(key)
                self.event(event)
                added += 1
        return added

    def sorted(self) -> list[Entry]:
        return sorted(self.entries, key=lambda e: e.ts_ms)

    def render(self, kinds: frozenset[str] | None = None) -> list[str]:
        """One line per entry: seconds since the start, kind, who, what, text. An entry that
        repeats one of the last REPEAT_WINDOW_MS (a follower retrying its fetch) is folded
        into it: "(x7 until +2.411s)"."""
        shown: list[tuple[Entry, list[int]]] = []
        last: dict[tuple[str, str, str, str], tuple[Entry, list[int]]] = {}
        for e in self.sorted():
            if kinds is not None and e.kind not in kinds:
                continue
            key = (e.kind, e.who, e.what, e.text)
            seen = last.get(key)
            if seen is not None and e.ts_ms - seen[1][-1] <= REPEAT_WINDOW_MS:
                seen[1].append(e.ts_ms)
                continue
            last[key] = (e, [e.ts_ms])
            shown.append(last[key])
        out = []
        for e, times in shown:
            line = self.line(e)
            if len(times) > 1:
                line += f" (x{len(times)} until {self._rel(times[-1])})"
            out.append(line)
        return out

    def _rel(self, ts_ms: int) -> str:
        return f"{(ts_ms - self.start_ms) / 1000:+.3f}s"

    def line(self, e: Entry) -> str:
        return f"{self._rel(e.ts_ms):>9}  {e.kind:<5} {e.who:<13} {e.what:<26} {e.text}".rstrip()

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {**asdict(e), "t_s": round((e.ts_ms - self.start_ms) / 1000, 3)} for e in self.sorted()
        ]
