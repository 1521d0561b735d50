"""Progress lines while a load runs (Spark's own progress bar is off): every few seconds, the
elapsed time and how many records the topic gained since the start, from its high watermarks.

The high watermark counts what replicated, not what was acknowledged: with acks=all the two
agree, and it moves while a task is still sending (the ledger appears only when a task ends).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence

from loadgen.cluster import end_offsets
from minibroker.client import ClientError
from minibroker.runtime.clock import monotonic_ms

INTERVAL_S = 5.0
# A progress look-up must not stall the line behind a dead leader for long.
LOOKUP_TIMEOUT_MS = 2_000


def progress_line(elapsed_s: float, gained: int | None, previous: int, interval_s: float) -> str:
    """One line: elapsed time, records gained so far and the rate since the previous line."""
    if gained is None:
        return f"loadgen: {elapsed_s:6.1f} s: topic offsets unavailable (leader moving?)"
    rate = max(0, gained - previous) / interval_s
    return f"loadgen: {elapsed_s:6.1f} s: {gained:,} records in the topic ({rate:,.0f}/s)"


class ProgressPrinter(threading.Thread):
    """Prints a progress line every `interval_s` until `stop()`."""

    def __init__(
        self,
        bootstrap: Sequence[str],
        topic: str,
        starting: Mapping[int, int],
        *,
        interval_s: float = INTERVAL_S,
        say: Callable[[str], None] = print,
    ) -> None:
        super().__init__(name="loadgen-progress", daemon=True)
        self.bootstrap = list(bootstrap)
        self.topic = topic
        self.starting = dict(starting)
        self.interval_s = interval_s
        self._say = say
        self._stopping = threading.Event()

    def stop(self) -> None:
        self._stopping.set()
        if self.is_alive():
            self.join(timeout=LOOKUP_TIMEOUT_MS / 1000 + 5)

    def run(self) -> None:
        start = monotonic_ms()
        previous = 0
        while not self._stopping.wait(self.interval_s):
            gained = self._gained()
            self._say(
                progress_line((monotonic_ms() - start) / 1000, gained, previous, self.interval_s)
            )
            previous = gained if gained is not None else previous

    def _gained(self) -> int | None:
        try:
            return records_gained(self.bootstrap, self.topic, self.starting)
        except (ClientError, OSError):
            return None


def records_gained(bootstrap: Sequence[str], topic: str, starting: Mapping[int, int]) -> int:
    """How many records the topic's partitions gained since `starting` (their high watermarks
    then); raises ClientError when the offsets cannot be listed within LOOKUP_TIMEOUT_MS."""
    now = end_offsets(bootstrap, topic, len(starting), timeout_ms=LOOKUP_TIMEOUT_MS)
    return sum(offset - starting.get(p, 0) for p, offset in now.items())
