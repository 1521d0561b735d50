"""The only place that reads the clock. Everything else takes `now_ms` as an argument."""

from __future__ import annotations

import time


def now_ms() -> int:
    """Wall-clock milliseconds since the epoch (for znode timestamps and log lines)."""
    return time.time_ns() // 1_000_000


def monotonic_ms() -> int:
    """Milliseconds on a clock that never goes backwards (for timers and lag)."""
    return time.monotonic_ns() // 1_000_000
