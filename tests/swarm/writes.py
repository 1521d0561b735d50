"""An acks=all writer running through a fault on the swarm, recorded for the history checker,
and the read-back that checks nothing acknowledged was lost."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from minibroker.client.admin_zk import create_topic, read_topic, wait_for_leaders
from minibroker.history import HistoryRecorder, check, load
from minibroker.runtime.waiting import WaitTimeout, wait_until
from tests.swarm.conftest import Swarm


@contextmanager
def writes_through(swarm: Swarm, topic: str, folder: Path) -> Iterator[None]:
    """A topic of 3 partitions, RF 3, min.insync.replicas 2, written to with acks=all and
    idempotence from outside the swarm while the body runs (and 2 s before it)."""
    zk = swarm.zk()
    try:
        create_topic(zk, topic, 3, 3, {"min.insync.replicas": "2"}, random.Random(topic))
        wait_for_leaders(zk, topic, 30_000)
    finally:
        zk.stop()
    stop = threading.Event()
    with HistoryRecorder(folder / f"{topic}-writes.jsonl") as recorder:
        producer = recorder.producer(
            {"bootstrap.servers": swarm.bootstrap_servers, "acks": "all",
             "enable.idempotence": True, "message.timeout.ms": 60_000}
        )  # fmt: skip

        def write() -> None:
            i = 0
            while not stop.is_set():
                producer.produce(topic, b"w-%d" % i, partition=i % 3)
                producer.poll(0)
                i += 1
                time.sleep(0.01)
            producer.flush(90)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            time.sleep(2)
            yield
        finally:
            stop.set()
            writer.join(120)


def wait_partitions(
    swarm: Swarm, topic: str, pred: Callable[[list[int], int], bool], what: str, timeout_s: float
) -> float:
    """Wait until pred(isr, leader) holds for every partition of `topic`; the seconds taken."""
    zk = swarm.zk()
    started = time.monotonic()
    try:
        last: list[str] = []

        def holds() -> bool:
            info = read_topic(zk, topic)
            states = sorted(info.states.items()) if info else []
            last[:] = [f"{tp}: leader {s.leader} ISR {list(s.isr)}" for tp, s in states]
            return bool(states) and all(pred(list(s.isr), s.leader) for _, s in states)

        try:
            wait_until(holds, timeout_s=timeout_s, what=what)
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}; last seen: {'; '.join(last)}") from None
    finally:
        zk.stop()
    return time.monotonic() - started


def without(broker: int) -> Callable[[list[int], int], bool]:
    return lambda isr, leader: leader != broker and broker not in isr


def all_in_sync(isr: list[int], leader: int) -> bool:
    return sorted(isr) == [1, 2, 3]


def read_back_and_check(swarm: Swarm, topic: str, folder: Path) -> int:
    """Read `topic` to its end from outside, check the recorded history (nothing acknowledged
    lost, no duplicate); the number of acknowledged writes."""
    with HistoryRecorder(folder / f"{topic}-reads.jsonl") as recorder:
        consumer = recorder.consumer(
            {"bootstrap.servers": swarm.bootstrap_servers, "group.id": f"audit-{topic}",
             "auto.offset.reset": "earliest", "enable.partition.eof": True}
        )  # fmt: skip
        consumer.subscribe([topic])
        at_end: set[int] = set()
        deadline = time.monotonic() + 60
        while at_end != {0, 1, 2} and time.monotonic() < deadline:
            m = consumer.poll(0.5)
            if m is not None:
                (at_end.add if m.error() else at_end.discard)(m.partition())
        consumer.close()
    files = sorted(folder.glob(f"{topic}-*.jsonl"))
    result = check(load(files))
    assert result.ok, result.text()
    sent = [s for s in load([folder / f"{topic}-writes.jsonl"]).sends if s.outcome == "ok"]
    assert len(sent) > 100
    return len(sent)
