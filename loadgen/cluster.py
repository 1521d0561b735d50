"""The load generator's view of the cluster: preparing the topic (the library call behind
`minibroker topics create --if-not-exists --wait`) and reading high watermarks for the run's
starting offsets and its progress lines."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

from minibroker.client import Consumer, TopicPartition, admin_zk
from minibroker.localcluster import zk_session

TOPIC_WAIT_MS = 30_000


def ensure_topic(
    zk_connect: str, topic: str, partitions: int, replication_factor: int, min_insync: int
) -> int:
    """Create the topic unless it exists, wait until every partition has a leader, and return
    its partition count (an existing topic keeps its own)."""
    with zk_session(zk_connect) as zk:
        config = {"min.insync.replicas": str(min_insync)}
        created = admin_zk.ensure_topic(
            zk,
            topic,
            partitions,
            replication_factor,
            config,
            wait_timeout_ms=TOPIC_WAIT_MS,
            rng=random.Random(),
        )
        if created:
            print(f"Created topic {topic}.", flush=True)
        return len(admin_zk.read_topic_or_raise(zk, topic).assignment)


def end_offsets(
    bootstrap: Sequence[str],
    topic: str,
    partitions: int,
    timeout_ms: int = 10_000,
    *,
    beginning: bool = False,
) -> dict[int, int]:
    """Each partition's high watermark (its log start offset with `beginning`), asked of its
    leader (raises ClientError)."""

    async def ask() -> dict[int, int]:
        async with Consumer(
            list(bootstrap), request_timeout_ms=timeout_ms, default_api_timeout_ms=timeout_ms
        ) as consumer:
            tps = [TopicPartition(topic, p) for p in range(partitions)]
            got = await (
                consumer.beginning_offsets(tps) if beginning else consumer.end_offsets(tps)
            )
        return {tp.partition: offset for tp, offset in got.items()}

    return asyncio.run(ask())
