"""A confluent-kafka (librdkafka) producer writing with acks=all while a group of two consumers
reads, around a fault: what every test of the KAFKA listener under failure runs, in process
mode and on the compose cluster. Nothing is mocked: it talks to the brokers' Kafka ports."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

CONSUMER: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "enable.auto.commit": True,
    "auto.commit.interval.ms": 500,
}


def consumed(consumer: Any) -> list[tuple[int, int, bytes]]:
    """What one consume() call brings (a batch: a member without records must not slow the
    other down)."""
    msgs = consumer.consume(num_messages=1000, timeout=0.05)
    return [
        (m.partition() or 0, m.offset() or 0, m.value() or b"") for m in msgs if m.error() is None
    ]


@dataclass
class StreamRun:
    acked: dict[tuple[int, int], bytes] = field(default_factory=dict)
    errors: list[object] = field(default_factory=list)
    read: list[tuple[int, int, bytes]] = field(default_factory=list)

    def missing(self) -> dict[tuple[int, int], bytes]:
        """Acknowledged records not read back at their offset."""
        got = {(p, o): v for p, o, v in self.read}
        return {k: v for k, v in self.acked.items() if got.get(k) != v}


def stream_through(
    bootstrap: str,
    topic: str,
    group: str,
    fault: Callable[[], None],
    *,
    before_s: float = 4.0,
    after_s: float = 12.0,
    catch_up_s: float = 60.0,
    security: Mapping[str, str] | None = None,
) -> StreamRun:
    """Produce and consume for `before_s`, run `fault`, go on for `after_s`, stop producing,
    then read until every acknowledged record is read (or `catch_up_s` passed). `security`:
    the clients' security settings (librdkafka's names), for a secured listener."""
    from confluent_kafka import Consumer, Producer

    run = StreamRun()
    stop = threading.Event()

    def produce() -> None:
        producer = Producer(
            {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, **(security or {})}
        )

        def delivered(err: object, msg: Any) -> None:
            if err is not None:
                run.errors.append(err)
            else:
                run.acked[(msg.partition(), msg.offset())] = msg.value()

        i = 0
        while not stop.is_set():
            producer.produce(topic, b"%s-%d" % (topic.encode(), i), callback=delivered)
            producer.poll(0.005)
            i += 1
        producer.flush(60)

    writer = threading.Thread(target=produce)
    writer.start()
    conf = {"bootstrap.servers": bootstrap, "group.id": group, **CONSUMER, **(security or {})}
    members = [Consumer(conf), Consumer(conf)]
    try:
        for m in members:
            m.subscribe([topic])

        def drain(seconds: float) -> None:
            until = time.monotonic() + seconds
            while time.monotonic() < until:
                for m in members:
                    run.read.extend(consumed(m))

        drain(before_s)
        fault()
        drain(after_s)
        stop.set()
        writer.join(90)
        deadline = time.monotonic() + catch_up_s
        while run.missing() and time.monotonic() < deadline:
            drain(0.5)
    finally:
        stop.set()
        writer.join(90)
        for m in members:
            m.close()
    return run
