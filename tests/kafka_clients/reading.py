"""Reading a topic to its end with confluent-kafka: until every assigned partition reported
end-of-partition (librdkafka's `enable.partition.eof`: the high watermark, or the LSO for a
read_committed consumer), not until some seconds passed without a record.

An idle timer started before the consumer could read (a subscribing consumer's group join,
which in a fresh cluster waits for __consumer_offsets to be created, led and loaded) read
nothing on a slow machine (issue 38: `[] == [committed-0 …]`)."""

from __future__ import annotations

import time
from typing import Any

READER: dict[str, Any] = {"auto.offset.reset": "earliest", "enable.auto.commit": False,
                          "enable.partition.eof": True}  # fmt: skip


def read_to_end(consumer: Any, deadline_s: float) -> list[Any]:
    """Every message `consumer` (built with READER's settings) polls until each partition of
    its assignment is at its end; AssertionError at the deadline, naming what it waited for."""
    from confluent_kafka import KafkaError

    out: list[Any] = []
    at_end: set[tuple[str, int]] = set()
    deadline = time.monotonic() + deadline_s
    while True:
        assigned = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        if assigned and assigned <= at_end:
            return out
        assert time.monotonic() < deadline, (
            f"not at the end within {deadline_s:g} s: assigned {sorted(assigned)}, "
            f"at the end {sorted(at_end)}, {len(out)} read"
        )
        m = consumer.poll(0.5)
        if m is None:
            continue
        where = (m.topic() or "", m.partition() or 0)
        error = m.error()
        if error is None:
            out.append(m)
            at_end.discard(where)
        elif error.code() == KafkaError._PARTITION_EOF:
            at_end.add(where)
