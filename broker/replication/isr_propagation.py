"""When a broker tells the controller about its ISR changes (reference §3.2).

Changes are collected and written as one /isr_change_notification/isr_change_<seq> node once
nothing changed for the blackout (5 s), or at the latest every maximum delay (60 s) under
continuous churn; the check runs every 2.5 s. Both clocks start at broker start.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from minibroker.core.types import TopicPartition


@dataclass
class IsrChangePropagation:
    start_ms: int
    blackout_ms: int = 5000
    max_delay_ms: int = 60000
    pending: set[TopicPartition] = field(default_factory=set)
    last_change_ms: int = -1
    last_propagation_ms: int = -1

    def __post_init__(self) -> None:
        if self.last_change_ms < 0:
            self.last_change_ms = self.start_ms
        if self.last_propagation_ms < 0:
            self.last_propagation_ms = self.start_ms

    def record(self, tp: TopicPartition, now_ms: int) -> None:
        """An ISR write for `tp` succeeded at `now_ms`."""
        self.pending.add(tp)
        self.last_change_ms = now_ms

    def maybe_propagate(self, now_ms: int) -> frozenset[TopicPartition]:
        """The partitions to write in one notification now, or nothing yet."""
        quiet = self.last_change_ms + self.blackout_ms < now_ms
        overdue = self.last_propagation_ms + self.max_delay_ms < now_ms
        if not self.pending or not (quiet or overdue):
            return frozenset()
        out = frozenset(self.pending)
        self.pending.clear()
        self.last_propagation_ms = now_ms
        return out
