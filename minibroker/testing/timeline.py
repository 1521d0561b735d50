"""The cluster's event timeline as objects: every broker's and controller's structured events
(the JSON lines of their logs, every life of each process), merged by time.

Each ISR, leader and controller change is one event (`isr_shrink`, `isr_expand`,
`leader_elected`, `became_leader`, `controller_elected`, ...): `minibroker events` prints the
same timeline, and `str(event)` is its line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from minibroker.client.event_text import is_story, render
from minibroker.localcluster import ClusterState
from minibroker.runtime.logging import parse_line

# The processes whose events make the timeline (ZooKeeper's log is Java's, the tools' are not
# the cluster's own).
ROLES = ("broker", "controller")


@dataclass(frozen=True)
class Event:
    """One structured event: when (`ts_ms`, wall clock ms), which node logged it (`node`:
    broker-1, controller-2), what (`kind`: isr_shrink, leader_elected, ...) and the rest of
    its fields (`fields["tp"]`, `fields["isr"]`, ...; `event["tp"]` reads them too)."""

    ts_ms: int
    node: str
    kind: str
    fields: Mapping[str, Any]

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)

    @property
    def tp(self) -> str | None:
        """The partition it is about, as Kafka writes it (`orders-0`), where it has one."""
        tp = self.fields.get("tp")
        return None if tp is None else str(tp)

    @property
    def is_story(self) -> bool:
        """Part of the replication story (ISR, leader, controller, broker and fault turns; not
        a per-request HW move): the events `minibroker events` shows by default."""
        return is_story({**self.fields, "event": self.kind})

    def __str__(self) -> str:
        return render({**self.fields, "ts": self.ts_ms, "proc": self.node, "event": self.kind})

    @classmethod
    def from_line(cls, raw: Mapping[str, Any], node: str) -> Event | None:
        ts = raw.get("ts")
        kind = raw.get("event")
        if not isinstance(ts, int) or not isinstance(kind, str):
            return None
        rest = {k: v for k, v in raw.items() if k not in ("ts", "event")}
        return cls(ts, str(raw.get("proc") or node), kind, rest)


class _LogFile:
    """One process's log, read from where the last read stopped (logs only grow: a restarted
    process appends), so waiting on the timeline costs the new lines, not the whole log."""

    def __init__(self, path: str, node: str) -> None:
        self.path, self.node = path, node
        self.offset = 0
        self.events: list[Event] = []

    def read(self) -> list[Event]:
        try:
            with open(self.path, "rb") as f:
                size = f.seek(0, 2)
                if size < self.offset:  # a new file under the same name: start again
                    self.offset, self.events = 0, []
                f.seek(self.offset)
                data = f.read(size - self.offset)
        except OSError:
            return self.events
        end = data.rfind(b"\n") + 1  # whole lines only; a line being written waits
        self.offset += end
        for line in data[:end].decode(errors="replace").splitlines():
            raw = parse_line(line)
            event = None if raw is None else Event.from_line(raw, self.node)
            if event is not None:
                self.events.append(event)
        return self.events


class _LogText:
    """A container's log as the engine hands it over whole (it only grows while the container
    exists: every life of it), parsed from where the last read stopped."""

    def __init__(self, node: str) -> None:
        self.node = node
        self.parsed = 0
        self.events: list[Event] = []

    def read(self, text: str) -> list[Event]:
        if len(text) < self.parsed:  # a new container under the same name: start again
            self.parsed, self.events = 0, []
        end = text.rfind("\n") + 1
        if end > self.parsed:
            for line in text[self.parsed : end].splitlines():
                raw = parse_line(line)
                event = None if raw is None else Event.from_line(raw, self.node)
                if event is not None:
                    self.events.append(event)
            self.parsed = end
        return self.events


class ContainerTimeline:
    """The merged timeline of a compose cluster's brokers and controllers, from their
    containers' logs (`read_logs()`: the log text by node name)."""

    def __init__(self, read_logs: Callable[[], Mapping[str, str]]) -> None:
        self._read_logs = read_logs
        self._logs: dict[str, _LogText] = {}

    def read(self, since_ms: int = 0) -> list[Event]:
        events: list[Event] = []
        for node, text in self._read_logs().items():
            log = self._logs.setdefault(node, _LogText(node))
            events += (e for e in log.read(text) if e.ts_ms >= since_ms)
        events.sort(key=lambda e: e.ts_ms)
        return events


class Timeline:
    """The merged timeline of a cluster's brokers and controllers, read incrementally."""

    def __init__(self) -> None:
        self._logs: dict[str, _LogFile] = {}

    def read(self, state: ClusterState, since_ms: int = 0) -> list[Event]:
        """Every broker's and controller's events logged at or after `since_ms`, oldest first."""
        events: list[Event] = []
        for p in state.processes:
            if p.role not in ROLES:
                continue
            log = self._logs.get(p.log_file)
            if log is None:
                log = self._logs[p.log_file] = _LogFile(p.log_file, p.name)
            events += (e for e in log.read() if e.ts_ms >= since_ms)
        events.sort(key=lambda e: e.ts_ms)
        return events


def of_kind(events: Iterable[Event], *kinds: str, tp: str | None = None) -> list[Event]:
    """The events of these kinds (about partition `tp`, when given), in order."""
    return [e for e in events if e.kind in kinds and (tp is None or e.tp == tp)]
