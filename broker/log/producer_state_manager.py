"""A partition's idempotent producers and their snapshot files (Kafka 2.6's
ProducerStateManager around the pure ProducerStateTable).

- The table is built the first time a producer's batch needs it: from the latest snapshot the
  log opened with, then the batch headers from the snapshot's offset on, so a restart reads
  only the tail written since the last snapshot (Kafka's loadProducerState).
- A snapshot `<LEO>.snapshot` is written when the log rolls (not fsynced, as Kafka's: a torn
  one fails its CRC and is discarded) and at a clean stop (fsynced); those below the log start
  offset go with it, those past the log end with truncation.
- Opening checks them: one past the log end or below the start is deleted, one that does not
  decode is deleted and the state rebuilt from the log, each said in the log's repairs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from broker.log import producer_snapshot as snap
from broker.log.producer_state import ProducerStateTable
from broker.log.store import SegmentStore
from broker.log.txn_index import AbortedTxn
from minibroker.core.control_records import Marker
from minibroker.core.records import BatchHeader

# The batches from an offset on, each with its marker if it is a control batch.
ReplayFrom = Callable[[int], Iterable[tuple[BatchHeader, Marker | None]]]


class ProducerStateManager:
    def __init__(
        self, store: SegmentStore, *, log_start: int, log_end: int, repairs: list[str]
    ) -> None:
        self._store = store
        self.table: ProducerStateTable | None = None
        found = sorted(o for n in store.list() if (o := snap.offset_of(n)) is not None)
        for offset in found:
            if not log_start <= offset <= log_end:
                store.delete(snap.file_name(offset))
                repairs.append(
                    f"{snap.file_name(offset)}: deleted (outside the log's offsets "
                    f"{log_start}..{log_end})"
                )
        self._offsets = [o for o in found if log_start <= o <= log_end]
        # The latest snapshot that decodes, read now so that a damaged one is reported with
        # the log's other repairs; the table is built from it on first need.
        self._loaded: tuple[int, list[snap.SnapshotEntry]] | None = None
        while self._offsets and self._loaded is None:
            offset = self._offsets[-1]
            name = snap.file_name(offset)
            try:
                self._loaded = offset, snap.decode(store.read(name, 0, store.size(name)))
            except snap.CorruptSnapshot as exc:
                store.delete(name)
                self._offsets.pop()
                repairs.append(f"{name}: discarded ({exc}); producer state rebuilt from the log")

    @property
    def snapshot_offsets(self) -> list[int]:
        return list(self._offsets)

    def get(
        self, replay_from: ReplayFrom, aborts: list[AbortedTxn] | None = None
    ) -> ProducerStateTable:
        """The table, built on first use (the snapshot, then the batches and markers after
        it); the aborted transactions the replay met are added to `aborts`."""
        if self.table is None:
            table = ProducerStateTable()
            start = 0
            if self._loaded is not None:
                start, entries = self._loaded
                table.load(entries)
                self._loaded = None
            for h, marker in replay_from(start):
                if marker is None:
                    table.record([h])
                    continue
                _, aborted = table.record_marker(h, marker)
                if aborted is not None and aborts is not None:
                    aborts.append(aborted)
            self.table = table
        return self.table

    def record(self, headers: Iterable[BatchHeader]) -> None:
        if self.table is not None:
            self.table.record(headers)

    def take_snapshot(self, log_end: int, *, durable: bool = False) -> bool:
        """Write `<log_end>.snapshot` if the table is built and this offset has none yet."""
        if self.table is None or (self._offsets and self._offsets[-1] >= log_end):
            return False
        name = snap.file_name(log_end)
        data = snap.encode(self.table.snapshot())
        if durable:
            self._store.write_atomic(name, data)
        else:
            self._store.delete(name)
            self._store.append(name, data)
        self._offsets.append(log_end)
        return True

    def delete_before(self, log_start: int) -> None:
        """The log start moved (Kafka's deleteSnapshotsBefore). A snapshot not yet loaded
        that lies below it is dropped too: the batches after it are gone, so a table built
        from it would miss some; without it the producers left start over (any sequence)."""
        self._delete([o for o in self._offsets if o < log_start])
        if self._loaded is not None and self._loaded[0] < log_start:
            self._loaded = None

    def truncate_to(self, log_end: int) -> None:
        if self.table is not None:
            self.table.truncate_to(log_end)
        self._delete([o for o in self._offsets if o > log_end])
        if self._loaded is not None and self._loaded[0] > log_end:
            self._loaded = None

    def clear(self) -> None:
        if self.table is not None:
            self.table.clear()
        self._delete(list(self._offsets))
        self._loaded = None

    def _delete(self, offsets: list[int]) -> None:
        for offset in offsets:
            self._store.delete(snap.file_name(offset))
            self._offsets.remove(offset)
