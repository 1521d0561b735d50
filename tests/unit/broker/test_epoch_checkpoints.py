"""Leader-epoch checkpoints written later, in batches: the file catches up with the log, and a
crash before it does loses no epoch that a batch carries."""

from __future__ import annotations

import asyncio

from broker.epoch_checkpoints import EpochCheckpointWriter
from broker.log.checkpoints import LEADER_EPOCH_CHECKPOINT, parse_epochs
from broker.log.log import Log
from broker.log.store import MemorySegmentStore
from broker.replication.leader_epoch import EpochEntry
from minibroker.core.records import NewRecord, build_batch


def batch(value: bytes) -> bytes:
    return build_batch([NewRecord(None, value)], base_timestamp=1_700_000_000_000)


def on_disk(store: MemorySegmentStore) -> list[EpochEntry]:
    return parse_epochs(store.data(LEADER_EPOCH_CHECKPOINT))


def test_many_logs_changes_are_written_in_one_batch_off_the_loop() -> None:
    async def body() -> tuple[list[MemorySegmentStore], int]:
        writer = EpochCheckpointWriter()
        stores = [MemorySegmentStore() for _ in range(50)]
        logs = [Log(s) for s in stores]
        for log in logs:
            log.defer_epoch_writes(writer.changed)
            log.epoch_cache.assign(0, 0)
            log.epoch_cache.assign(2, 0)  # two changes, one write: the latest
        assert all(s.size(LEADER_EPOCH_CHECKPOINT) == 0 for s in stores)  # nothing yet
        await writer.flush()
        return stores, writer.batches

    stores, batches = asyncio.run(body())
    assert batches == 1
    assert all(on_disk(s) == [EpochEntry(2, 0)] for s in stores)


def test_a_crash_before_the_write_keeps_the_epochs_the_batches_carry() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    log.append_as_leader(batch(b"a"), leader_epoch=0)
    log.flush()
    assert on_disk(store) == [EpochEntry(0, 0)]
    log.defer_epoch_writes(lambda _log: None)  # a writer that never gets to run
    log.epoch_cache.assign(3, log.log_end_offset)  # became leader in epoch 3
    log.append_as_leader(batch(b"b"), leader_epoch=3)
    log.flush()
    store.crash()
    assert on_disk(store) == [EpochEntry(0, 0)]  # the file is behind
    again = Log(store)
    assert again.epoch_cache.entries == (EpochEntry(0, 0), EpochEntry(3, 1))
    assert any("behind the log" in r for r in again.repairs)
    assert on_disk(store) == [EpochEntry(0, 0), EpochEntry(3, 1)]  # and is written anew


def test_a_closed_log_drops_its_pending_change() -> None:
    store = MemorySegmentStore()
    log = Log(store)
    log.defer_epoch_writes(lambda _log: None)
    log.epoch_cache.assign(1, 0)
    log.close()
    assert log.take_epoch_checkpoint() is None
