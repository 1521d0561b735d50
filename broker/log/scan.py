"""Reading a whole partition back, as a coordinator does when it becomes the leader of a
partition of `__consumer_offsets` or `__transaction_state` (Kafka's doLoadGroupsAndOffsets,
loadTransactionMetadata): every batch from the log start to the log end, a buffer at a time,
yielding the loop between buffers."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from broker.log.log import Log
from minibroker.core.records import BatchHeader, iter_batches


async def batches_to_end(
    log: Log, buffer_bytes: int
) -> AsyncIterator[tuple[bytes, BatchHeader, int]]:
    """(buffer, batch header, offset reached) for every batch. The log end is read again each
    round, so what is appended meanwhile (a transaction's marker) is read too; the log start
    too (retention may move it). A batch may begin below the offset reached: its records
    below it were read before."""
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        offset = max(offset, log.log_start_offset)
        data = log.read(offset, buffer_bytes)
        if not data:
            return
        for header in iter_batches(data):
            yield data, header, offset
            offset = max(offset, header.next_offset)
        await asyncio.sleep(0)
