"""What the log answers besides bytes: an append's offsets, a read out of range, and the
clock record timestamps are compared with."""

from __future__ import annotations

import time
from dataclasses import dataclass

from minibroker.core.errors import ErrorCode

WEEK_MS = 7 * 24 * 3600 * 1000  # segment.ms's default (log.roll.hours 168)


def wall_clock_ms() -> int:
    """Record timestamps are wall-clock times, so segment.ms and retention.ms are too."""
    return time.time_ns() // 1_000_000


class OffsetOutOfRange(Exception):
    """A fetch offset below the log start or above the LEO."""

    code = ErrorCode.OFFSET_OUT_OF_RANGE

    def __init__(self, fetch_offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(
            f"fetch offset {fetch_offset} is out of range: log start offset {log_start_offset}, "
            f"log end offset {log_end_offset}"
        )
        self.fetch_offset = fetch_offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset


@dataclass(frozen=True)
class AppendInfo:
    first_offset: int
    last_offset: int
    batch_count: int
    size_bytes: int
