"""The load generator's view of the cluster: preparing the topic (with the same code as
`minibroker topics create --if-not-exists --wait`) and reading high watermarks for the run's
starting offsets and its progress lines."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Sequence

from minibroker.cli.topics import cmd_create
from minibroker.client import Consumer, TopicPartition
from minibroker.client.admin_zk import read_topic_or_raise
from minibroker.localcluster import zk_session

TOPIC_WAIT_MS = 30_000


def ensure_topic(
    zk_connect: str, topic: str, partitions: int, replication_factor: int, min_insync: int
) -> int:
    """Create the topic unless it exists, wait until every partition has a leader, and return
    its partition count (an existing topic keeps its own)."""
    cmd_create(
        argparse.Namespace(
            topic=topic,
            partitions=partitions,
            replication_factor=replication_factor,
            config=[f"min.insync.replicas={min_insync}"],
            if_not_exists=True,
            wait=True,
            timeout_ms=TOPIC_WAIT_MS,
            zk=zk_connect,
            bootstrap=None,
            dir=None,
        )
    )
    with zk_session(zk_connect) as zk:
        return len(read_topic_or_raise(zk, topic).assignment)


def end_offsets(
    bootstrap: Sequence[str], topic: str, partitions: int, timeout_ms: int = 10_000
) -> dict[int, int]:
    """Each partition's high watermark, asked of its leader (raises ClientError)."""

    async def ask() -> dict[int, int]:
        async with Consumer(
            list(bootstrap), request_timeout_ms=timeout_ms, default_api_timeout_ms=timeout_ms
        ) as consumer:
            got = await consumer.end_offsets(TopicPartition(topic, p) for p in range(partitions))
        return {tp.partition: offset for tp, offset in got.items()}

    return asyncio.run(ask())
