"""The simulation's clock and event queue: one event at a time, in (time, sequence) order.

Nothing here is random or reads a real clock, so a seed replays exactly. Each event names the
node whose code it runs, so the invariant checker can look at what that node changed; the last
events are kept (cheaply, unformatted) for the failure report.
"""

from __future__ import annotations

import heapq
from collections import deque
from collections.abc import Callable
from typing import Any

TRACE_LENGTH = 25
ZK_NODE = 0
# The clock starts here, not at 0: the rules treat "time 0" as "long ago" (a replica that never
# caught up has last_caught_up_time_ms 0), as they may with a real monotonic clock.
START_MS = 1_000_000


class Idle:
    """Returned by an event handler that found nothing to do (a timer for a request already
    answered, a dead process's timer): the kernel then skips the invariant checks."""


IDLE = Idle()


class Violation(Exception):
    """An invariant does not hold: `invariant` names it, `detail` says where and how."""

    def __init__(self, invariant: str, detail: str) -> None:
        super().__init__(f"{invariant}: {detail}")
        self.invariant = invariant
        self.detail = detail


Event = tuple[int, int, int, Callable[..., object], tuple[Any, ...]]


class Kernel:
    def __init__(self, trace_length: int = TRACE_LENGTH) -> None:
        self.start_ms = START_MS
        self.now = START_MS
        self.index = 0  # events run so far
        self._seq = 0
        self._ids = 0
        self._heap: list[Event] = []
        self.trace: deque[tuple[int, int, int, Callable[..., object], tuple[Any, ...]]] = deque(
            maxlen=trace_length
        )
        self.notes: deque[tuple[int, int, str]] = deque(maxlen=trace_length)
        # Called after every event with the node it ran on.
        self.after_event: Callable[[int], None] = lambda node: None

    def at(self, time_ms: int, node: int, fn: Callable[..., object], *args: Any) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (time_ms, self._seq, node, fn, args))

    def after(self, delay_ms: int, node: int, fn: Callable[..., object], *args: Any) -> None:
        self.at(self.now + delay_ms, node, fn, *args)

    def next_id(self) -> int:
        """A request id unique in the whole run (a restarted node never reuses one)."""
        self._ids += 1
        return self._ids

    def note(self, text: str) -> None:
        """A line for the trace that is not an event (a fault starting, a decision)."""
        self.notes.append((self.index, self.now, text))

    def run(self, until_ms: int) -> None:
        heap = self._heap
        trace = self.trace.append
        after = self.after_event
        while heap and heap[0][0] <= until_ms:
            event = heapq.heappop(heap)
            self.now = event[0]
            self.index += 1
            trace((self.index, event[0], event[2], event[3], event[4]))
            if event[3](*event[4]) is not IDLE:
                after(event[2])
        self.now = max(self.now, until_ms)

    def format_trace(self, last: int = TRACE_LENGTH) -> list[str]:
        lines: list[tuple[int, int, str]] = []
        for index, time_ms, node, fn, args in list(self.trace)[-last:]:
            name = getattr(fn, "__qualname__", type(fn).__name__)
            shown = ", ".join(_short(a) for a in args)
            t = time_ms - self.start_ms
            lines.append((index, 0, f"#{index} t={t} node {node}: {name}({shown})"))
        for index, time_ms, text in self.notes:
            if lines and index >= lines[0][0]:
                lines.append((index, 1, f"   t={time_ms - self.start_ms} note: {text}"))
        lines.sort(key=lambda x: (x[0], x[1]))
        return [text for _, _, text in lines]


def _short(value: Any) -> str:
    # Callables by name: their reprs carry memory addresses, which differ between replays.
    text = getattr(value, "__qualname__", None) if callable(value) else None
    text = text or repr(value)
    return text if len(text) <= 160 else text[:157] + "..."
