"""What the chaos walkthroughs share (deploy/README.md's steps, in process mode and on the Docker
engine): an acks=all load that remembers what was acknowledged, a live `minibroker events
--follow` timeline, and the ZooKeeper and timeline look-ups their steps wait on."""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from minibroker.client.producer import Producer
from minibroker.client.read_back import read_to_high_watermark
from minibroker.core.types import TopicPartition
from minibroker.core.zk_layout import TopicZNode
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore

TOPIC = "demo"
PARTITIONS = 3
# Demo profile: session 6 s, lag 3 s, isr_change blackout 5 s; generous for a loaded CI box.
WAIT_S = 40.0

Event = dict[str, Any]
Steps = list[tuple[str, int, list[tuple[str, Event]]]]


class Load:
    """acks=all records round-robin over the partitions until stopped; keeps what was acked."""

    def __init__(self, bootstrap: list[str]) -> None:
        self.acked: dict[tuple[int, int], bytes] = {}
        self.failed = 0
        self._stop = threading.Event()
        self._bootstrap = bootstrap
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        async with Producer(self._bootstrap, acks="all", linger_ms=1) as producer:
            # One writer per partition: a stalled leader must not hold up the others' traffic
            # (a follower only falls out of the ISR when its leader has new data).
            await asyncio.gather(*(self._write(producer, p) for p in range(PARTITIONS)))

    async def _write(self, producer: Producer, partition: int) -> None:
        i = 0
        while not self._stop.is_set():
            value = b"p%d-%d" % (partition, i)
            try:
                md = await producer.send_and_wait(TOPIC, value, partition=partition)
                self.acked[(md.partition, md.offset)] = value
            except Exception:
                self.failed += 1
            i += 1
            await asyncio.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)


async def read_all(bootstrap: list[str]) -> dict[tuple[int, int], bytes | None]:
    tps = [TopicPartition(TOPIC, p) for p in range(PARTITIONS)]
    got = await read_to_high_watermark(bootstrap, tps)
    return {(tp.partition, offset): value for (tp, offset), value in got.items()}


class Timeline:
    """`minibroker events --follow --json` in the background, its events collected."""

    def __init__(self, where: Sequence[str]) -> None:
        """`where`: how `events` finds the cluster (`--dir D` or `--zk HOST:PORT`)."""
        self.events: list[Event] = []
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "minibroker.cli.main", "events", "--follow", "--json",
             *where],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.append(json.loads(line))

    def find(self, after_ms: int, pred: Callable[[Event], bool]) -> Event | None:
        return next((e for e in list(self.events) if e["ts"] >= after_ms and pred(e)), None)

    def wait(self, after_ms: int, what: str, pred: Callable[[Event], bool]) -> Event:
        return wait_until(lambda: self.find(after_ms, pred), timeout_s=WAIT_S, what=what)

    def close(self) -> str:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            _, err = self.proc.communicate(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, err = self.proc.communicate()
        self._reader.join(timeout=5)
        return err


def is_(name: str, **fields: Any) -> Callable[[Event], bool]:
    return lambda e: e["event"] == name and all(e.get(k) == v for k, v in fields.items())


def changed(name: str, broker: int) -> Callable[[Event], bool]:
    return lambda e: e["event"] == name and broker in e.get("changed", [])


def isr(zk: ZkStore, partition: int) -> tuple[int, ...]:
    state = zk.read_partition_state(TopicPartition(TOPIC, partition))
    return () if state is None else state.isr


def leader(zk: ZkStore, partition: int) -> int:
    state = zk.read_partition_state(TopicPartition(TOPIC, partition))
    return -1 if state is None else state.leader


def preferred(zk: ZkStore, partition: int) -> int:
    data, _ = zk.get(TopicZNode.path(TOPIC))
    return TopicZNode.decode(TOPIC, data).partitions[partition][0]


def render(steps: Steps) -> str:
    lines = []
    for title, at, seen in steps:
        lines.append(f"{title}")
        for what, ev in seen:
            lines.append(
                f"    +{(ev['ts'] - at) / 1000:5.2f} s  {what} ({ev['proc']}: {ev['event']})"
            )
    return "\n".join(lines)


def print_timeline(steps: Steps) -> None:
    print("\n" + render(steps))
