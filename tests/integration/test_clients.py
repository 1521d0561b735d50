"""The client library and the produce/consume CLI against real brokers (RF 3)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.client import Consumer, Producer
from minibroker.core.types import TopicPartition
from minibroker.runtime.zk_store import ZkStore
from tests.integration.conftest import Cluster, running_cluster
from tests.integration.controller_helper import FakeController

pytestmark = pytest.mark.integration


@pytest.fixture
def cc(tmp_path: Path) -> Iterator[tuple[Cluster, FakeController]]:
    d = tmp_path / "cluster"
    with running_cluster(d, "--set", "zookeeper.session.timeout.ms=2000") as state:
        zk = ZkStore(state.zk_connect, session_timeout_ms=5000)
        zk.start()
        try:
            ctl = FakeController(zk)
            ctl.create_topic("orders", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]})
            yield Cluster(d, state, zk), ctl
        finally:
            zk.stop()


def bootstrap(c: Cluster) -> str:
    return c.state.process("broker-2").address  # any broker: metadata finds the leaders


def test_producer_and_consumer_round_trip_every_acknowledged_record(
    cc: tuple[Cluster, FakeController],
) -> None:
    c, _ = cc

    async def run() -> None:
        async with Producer(bootstrap(c), acks=-1, linger_ms=5) as producer:
            futures = [
                await producer.send("orders", b"value-%d" % i, key=b"key-%d" % (i % 7))
                for i in range(300)
            ]
            acked = [await f for f in futures]
        assert {m.partition for m in acked} == {0, 1, 2}
        expected = {(m.partition, m.offset): b"value-%d" % i for i, m in enumerate(acked)}
        async with Consumer(bootstrap(c), auto_offset_reset="earliest") as consumer:
            tps = [TopicPartition("orders", p) for p in range(3)]
            consumer.assign(tps)
            consumer.seek_to_beginning(tps)
            ends = await consumer.end_offsets(tps)
            got: dict[tuple[int, int], bytes | None] = {}

            async def behind() -> bool:
                return any([await consumer.position(tp) < ends[tp] for tp in tps])

            while await behind():
                for r in await consumer.poll(timeout_ms=2000):
                    got[(r.partition, r.offset)] = r.value
        assert got == expected
        # Same key, same partition (Kafka's murmur2 partitioner).
        by_key: dict[int, set[int]] = {}
        for i, m in enumerate(acked):
            by_key.setdefault(i % 7, set()).add(m.partition)
        assert all(len(parts) == 1 for parts in by_key.values())

    asyncio.run(run())


def test_cli_produce_then_consume_until_hw(cc: tuple[Cluster, FakeController]) -> None:
    c, _ = cc
    lines = "".join(f"k{i}:hello {i}\n" for i in range(20))
    produced = subprocess.run(
        [
            sys.executable,
            "-m",
            "minibroker.cli.main",
            "produce",
            "orders",
            "--acks",
            "all",
            "--key-separator",
            ":",
            "--json",
            "--dir",
            str(c.dir),
        ],
        input=lines,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert produced.returncode == 0, produced.stderr
    acks = [json.loads(line) for line in produced.stdout.splitlines()]
    assert len(acks) == 20 and all("offset" in a and "error" not in a for a in acks)
    consumed = subprocess.run(
        [
            sys.executable,
            "-m",
            "minibroker.cli.main",
            "consume",
            "orders",
            "--from-beginning",
            "--until-hw",
            "--json",
            "--bootstrap",
            bootstrap(c),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert sorted(r["value"] for r in records) == sorted(f"hello {i}" for i in range(20))
    assert {(r["partition"], r["offset"]) for r in records} == {
        (a["partition"], a["offset"]) for a in acks
    }
    unknown = subprocess.run(
        [
            sys.executable,
            "-m",
            "minibroker.cli.main",
            "consume",
            "missing",
            "--until-hw",
            "--bootstrap",
            bootstrap(c),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        stdin=subprocess.DEVNULL,
    )
    assert unknown.returncode == 1 and "Traceback" not in unknown.stderr
    assert "missing" in unknown.stderr


def test_consumer_follows_a_leader_change(cc: tuple[Cluster, FakeController]) -> None:
    c, ctl = cc
    tp = TopicPartition("orders", 0)

    async def run() -> None:
        async with Producer(bootstrap(c), acks=-1) as producer:
            first = await producer.send_and_wait("orders", b"before", partition=0)
            ctl.elect(tp, 2, [1, 2, 3])  # leadership moves from broker 1 to broker 2
            second = await producer.send_and_wait("orders", b"after", partition=0)
        assert second.offset > first.offset
        async with Consumer(bootstrap(c)) as consumer:
            consumer.assign([tp])
            consumer.seek_to_beginning([tp])
            values: list[bytes | None] = []
            for _ in range(20):
                values += [r.value for r in await consumer.poll(timeout_ms=1000)]
                if b"after" in values:
                    break
        assert values == [b"before", b"after"]

    asyncio.run(run())
