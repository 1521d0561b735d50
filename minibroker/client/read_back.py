"""Read partitions back from their log start to their high watermark as of the call: what a
check that no acknowledged record was lost needs (the demo, the tests)."""

from __future__ import annotations

from collections.abc import Sequence

from minibroker.client.consumer import Consumer
from minibroker.core.types import TopicPartition


async def read_to_high_watermark(
    bootstrap: Sequence[str], tps: Sequence[TopicPartition], *, poll_timeout_ms: int = 2000
) -> dict[tuple[TopicPartition, int], bytes | None]:
    """Every record's value by (partition, offset), from the start of each partition up to its
    high watermark when the read began."""
    got: dict[tuple[TopicPartition, int], bytes | None] = {}
    async with Consumer(list(bootstrap)) as consumer:
        consumer.assign(list(tps))
        consumer.seek_to_beginning(list(tps))
        ends = await consumer.end_offsets(list(tps))
        while [tp for tp in tps if await consumer.position(tp) < ends[tp]]:
            for r in await consumer.poll(timeout_ms=poll_timeout_ms):
                got[(r.tp, r.offset)] = r.value
    return got


async def read_partition(bootstrap: Sequence[str], tp: TopicPartition) -> dict[int, bytes | None]:
    """One partition's values by offset, up to its high watermark when the read began."""
    got = await read_to_high_watermark(bootstrap, [tp])
    return {offset: value for (_, offset), value in got.items()}
