"""The leader-epoch cache: which leader epoch started at which offset (reference §4.2).

Kafka's LeaderEpochFileCache without the file: a change is reported through `on_change`, and
the log writes the `leader-epoch-checkpoint` file from it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(frozen=True, order=True)
class EpochEntry:
    epoch: int
    start_offset: int


class LeaderEpochCache:
    """Entries with strictly increasing epochs and start offsets."""

    def __init__(
        self,
        entries: Iterable[EpochEntry] = (),
        on_change: Callable[[tuple[EpochEntry, ...]], None] | None = None,
    ) -> None:
        self._entries: list[EpochEntry] = list(entries)
        self._on_change = on_change
        for a, b in zip(self._entries, self._entries[1:], strict=False):
            if not (a.epoch < b.epoch and a.start_offset < b.start_offset):
                raise ValueError(f"epoch entries must increase: {a} then {b}")

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self.entries)

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that `epoch` starts at `start_offset` (called for every appended batch and by
        make_leader). A no-op if the latest entry has this epoch and starts no later; otherwise
        every entry not strictly below the new one in both epoch and offset is dropped."""
        if epoch < 0:
            return False
        if self._entries:
            last = self._entries[-1]
            if last.epoch == epoch and last.start_offset <= start_offset:
                return False
        kept = [e for e in self._entries if e.epoch < epoch and e.start_offset < start_offset]
        self._entries = [*kept, EpochEntry(epoch, start_offset)]
        self._changed()
        return True

    def truncate_from_end(self, end_offset: int) -> None:
        """The log was truncated to `end_offset`: drop epochs that start at or after it."""
        kept = [e for e in self._entries if e.start_offset < end_offset]
        if len(kept) != len(self._entries):
            self._entries = kept
            self._changed()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log start moved to `start_offset`: drop epochs wholly before it and let the last
        earlier one start there."""
        before = [e for e in self._entries if e.start_offset <= start_offset]
        after = [e for e in self._entries if e.start_offset > start_offset]
        if not before or before[-1].start_offset == start_offset and len(before) == 1:
            return
        self._entries = [EpochEntry(before[-1].epoch, start_offset), *after]
        self._changed()

    def clear(self) -> None:
        if self._entries:
            self._entries = []
            self._changed()

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) answering OffsetsForLeaderEpoch: the largest epoch <= requested
        and the start offset of the next epoch, or the LEO for the latest epoch (KIP-279)."""
        if requested_epoch == UNDEFINED_EPOCH or not self._entries:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if requested_epoch == self.latest_epoch:
            return requested_epoch, log_end_offset
        subsequent = [e for e in self._entries if e.epoch > requested_epoch]
        previous = [e for e in self._entries if e.epoch <= requested_epoch]
        if not subsequent:
            return UNDEFINED_EPOCH, UNDEFINED_OFFSET
        if not previous:
            return requested_epoch, subsequent[0].start_offset
        return previous[-1].epoch, subsequent[0].start_offset
