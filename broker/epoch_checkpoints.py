"""Leader-epoch checkpoints written in batches, off the event loop.

Kafka rewrites a partition's `leader-epoch-checkpoint` (write, fsync, rename) on every epoch
change, in the request thread (reference §4.3). A deliberate deviation: a broker that becomes
leader of 3,334 partitions at once would do that 3,334 times on its one loop, seconds in which
it serves nothing. Here a log reports its change (Log.defer_epoch_writes) and the writer
rewrites every changed file in one worker thread, one batch after another: each file gets its
latest entries, in order.

A crash before a batch is written leaves an older checkpoint: opening the log then adds the
epochs its batches carry past the checkpoint's last entry (recovery.load_epochs), so an epoch
is only lost if no batch was written in it, which the follower truncation rules tolerate.
"""

from __future__ import annotations

import asyncio
import logging

from broker.log.log import Log
from minibroker.runtime import logging as slog


class EpochCheckpointWriter:
    def __init__(self) -> None:
        self._pending: dict[int, Log] = {}
        self._task: asyncio.Future[None] | None = None
        self.batches = 0  # batches written (tests)

    def changed(self, log: Log) -> None:
        """`log`'s epochs changed (on the loop): its file is written with the next batch."""
        self._pending[id(log)] = log
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._write_all())

    async def flush(self) -> None:
        """Wait until every change reported so far is on disk (shutdown)."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)

    async def _write_all(self) -> None:
        while self._pending:
            logs = list(self._pending.values())
            self._pending.clear()
            writes = [(log, data) for log in logs if (data := log.take_epoch_checkpoint())]
            if writes:
                await asyncio.to_thread(_write, writes)
                self.batches += 1


def _write(writes: list[tuple[Log, bytes]]) -> None:
    for log, data in writes:
        # A partition deleted meanwhile, a full disk: logged; the file is left as it was
        # until the log's next epoch change rewrites it (recovery covers the gap).
        try:
            log.write_epoch_checkpoint(data)
        except OSError as exc:
            slog.event("epoch_checkpoint_failed", logging.ERROR, error=str(exc))
