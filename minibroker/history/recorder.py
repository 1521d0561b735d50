"""HistoryRecorder: the shell that records an application's client operations as a
ClientHistory, in memory and (with `path`) as JSON lines flushed one op at a time, so the
history of a process that is killed survives up to its last op. Thread-safe: librdkafka's
delivery reports and a consumer's poll may run on different threads.
"""

from __future__ import annotations

import itertools
import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import IO, Any

from minibroker.history.model import ClientHistory, Op, from_line, to_line
from minibroker.runtime.clock import now_ms

GROUPS_KEPT = 64
_RECORDERS = itertools.count(1)  # a process's recorders get distinct client names


class HistoryRecorder:
    """Records ops; hands out recording clients (`producer`, `consumer`, and the kafka-python
    and aiokafka ones) that record what they do and otherwise behave as the client they wrap."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, name: str = "") -> None:
        self.name = name or f"{os.uname().nodename}-{os.getpid()}-{next(_RECORDERS)}"
        self._ops: list[Op] = []
        self._lock = threading.Lock()
        self._clients = 0
        self._groups: list[tuple[object, str]] = []  # (consumer group metadata, group id)
        self._file: IO[str] | None = None
        if path is not None:
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 - closed in close()

    def now_ms(self) -> int:
        return now_ms()

    def client_name(self, kind: str) -> str:
        with self._lock:
            self._clients += 1
            return f"{kind}-{self.name}-{self._clients}"

    def record(self, op: Op) -> None:
        line = json.dumps(to_line(op)) if self._file is not None else ""
        with self._lock:
            self._ops.append(op)
            if self._file is not None:
                self._file.write(line + "\n")
                self._file.flush()

    def remember_group(self, metadata: object, group: str) -> None:
        """A consumer's group metadata, so a transaction's offsets name the group. The object
        itself is kept (the last few), so its id cannot be reused meanwhile."""
        with self._lock:
            self._groups.append((metadata, group))
            del self._groups[:-GROUPS_KEPT]

    def group_of(self, metadata: object) -> str:
        with self._lock:
            return next((g for m, g in reversed(self._groups) if m is metadata), "")

    def history(self) -> ClientHistory:
        with self._lock:
            return ClientHistory(tuple(self._ops))

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None

    def __enter__(self) -> HistoryRecorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # Recording clients: each module imports its Kafka client only when asked for one.
    def producer(self, config: Mapping[str, Any], client: Any = None) -> Any:
        """A confluent-kafka Producer (or `client`, built from `config`) that records."""
        from minibroker.history.confluent import RecordingProducer

        return RecordingProducer(self, config, client)

    def consumer(self, config: Mapping[str, Any], client: Any = None) -> Any:
        """A confluent-kafka Consumer (or `client`, built from `config`) that records."""
        from minibroker.history.confluent import RecordingConsumer

        return RecordingConsumer(self, config, client)

    def kafka_python_producer(self, **config: Any) -> Any:
        from minibroker.history.kafka_python import RecordingKafkaProducer

        return RecordingKafkaProducer(self, config)

    def kafka_python_consumer(self, *topics: str, **config: Any) -> Any:
        from minibroker.history.kafka_python import RecordingKafkaConsumer

        return RecordingKafkaConsumer(self, topics, config)

    def aiokafka_producer(self, **config: Any) -> Any:
        from minibroker.history.aio import RecordingAIOProducer

        return RecordingAIOProducer(self, config)

    def aiokafka_consumer(self, *topics: str, **config: Any) -> Any:
        from minibroker.history.aio import RecordingAIOConsumer

        return RecordingAIOConsumer(self, topics, config)


def load(paths: Iterable[str | os.PathLike[str]]) -> ClientHistory:
    """One history of the JSON lines several recorders wrote (a torn last line, from a
    process killed mid-write, is skipped)."""
    parts = []
    for path in paths:
        ops = []
        for line in Path(path).read_text(encoding="utf-8").splitlines():
            try:
                ops.append(from_line(json.loads(line)))
            except (ValueError, KeyError, TypeError):
                continue
        parts.append(ops)
    return ClientHistory.of(*parts)
