"""A transactional workload for the history checker, after Jepsen's Kafka "queue" workload with
transactions: transactional producers writing unique values to several partitions in each
transaction (some aborted on purpose), a consume-transform-produce relay that commits its
consumer's offsets in its transactions, and read_committed readers, each in a group of its own,
reading everything from the beginning. Every client is confluent-kafka, recorded by a
HistoryRecorder (a file per client), so the history is what the clients saw: invoke, then ok,
fail or info (indefinite) for each send, each transaction's end, each record read, each empty
poll. `run` returns it; minibroker.history.check judges it.

    history = run(TxnWorkload(topic="queue"), cluster.confluent_config(), folder)
    assert check(history, delivery="exactly-once").ok
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from minibroker.history.model import ClientHistory
from minibroker.history.recorder import HistoryRecorder, load

CALL_TIMEOUT_S = 30.0  # init, commit and abort of a transaction


@dataclass(frozen=True)
class TxnWorkload:
    topic: str = "txn-queue"
    partitions: int = 3
    producers: int = 2
    readers: int = 2
    relay: bool = True  # a consume-transform-produce stage from `topic` into `relay_topic`
    transactions: int = 20  # per producer
    writes: int = 3  # records per transaction, one per partition in turn
    abort_every: int = 4  # each producer aborts its every Nth transaction (0: none)
    pause_s: float = 0.05  # between a producer's transactions
    transaction_timeout_ms: int = 10_000
    # The relay, once the producers are done, and the readers, once the relay is too, stop
    # where they have read every partition to its end, or after this long without a record.
    drain_s: float = 30.0
    deadline_s: float = 180.0
    prefix: str = "txnload"

    @property
    def relay_topic(self) -> str:
        return f"{self.topic}-relay"


def _error(exc: BaseException) -> Any:
    return exc.args[0] if exc.args and hasattr(exc.args[0], "fatal") else None


class _Run:
    def __init__(self, w: TxnWorkload, config: Mapping[str, Any], folder: Path) -> None:
        self.w, self.config, self.folder = w, dict(config), folder
        self.producers_done = threading.Event()
        self.relay_done = threading.Event()
        self.stop = threading.Event()
        self.errors: list[str] = []

    def _recorder(self, name: str) -> HistoryRecorder:
        return HistoryRecorder(self.folder / f"{name}.jsonl", name=name)

    def _transactional(self, recorder: HistoryRecorder, tid: str) -> Any:
        producer = recorder.producer(
            {**self.config, "transactional.id": tid, "enable.idempotence": True, "acks": "all",
             "transaction.timeout.ms": self.w.transaction_timeout_ms}
        )  # fmt: skip
        producer.init_transactions(CALL_TIMEOUT_S)
        return producer

    def _end_badly(self, producer: Any, exc: BaseException, renew: Callable[[], Any]) -> Any:
        """After a failed transaction: abort it where the client can, a new producer (the same
        transactional id, fencing the old) where its error is fatal or the abort fails."""
        error = _error(exc)
        if error is not None and not error.fatal():
            try:
                producer.abort_transaction(CALL_TIMEOUT_S)
                return producer
            except Exception:  # noqa: BLE001 - then as for a fatal error
                pass
        return renew()

    def produce(self, i: int) -> None:
        w = self.w
        with self._recorder(f"producer-{i}") as recorder:
            tid = f"{w.prefix}-producer-{i}"
            producer = self._transactional(recorder, tid)
            for n in range(w.transactions):
                if self.stop.is_set():
                    break
                try:
                    producer.begin_transaction()
                    for k in range(w.writes):
                        value = f"p{i}-t{n}-w{k}".encode()
                        producer.produce(w.topic, value, partition=(n + k) % w.partitions)
                    if w.abort_every and (n + 1) % w.abort_every == 0:
                        producer.abort_transaction(CALL_TIMEOUT_S)
                    else:
                        producer.commit_transaction(CALL_TIMEOUT_S)
                except Exception as exc:  # noqa: BLE001 - recorded as the transaction's end
                    producer = self._end_badly(
                        producer, exc, lambda: self._transactional(recorder, tid)
                    )
                time.sleep(w.pause_s)
            producer.flush(CALL_TIMEOUT_S)

    def relay(self) -> None:
        """Reads `topic` (read_committed) and writes each value, prefixed, to the same partition
        of the relay topic in a transaction that also commits the consumer's offsets."""
        from confluent_kafka import TopicPartition

        w = self.w
        with self._recorder("relay") as recorder:
            consumer = recorder.consumer(
                {**self.config, "group.id": f"{w.prefix}-relay", "enable.auto.commit": False,
                 "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
            )  # fmt: skip
            consumer.subscribe([w.topic])
            tid = f"{w.prefix}-relay"
            producer = self._transactional(recorder, tid)
            quiet_since = time.monotonic()
            while not self._done(consumer, self.producers_done, quiet_since):
                messages = [m for m in consumer.consume(100, 0.5) if m.error() is None]
                if not messages:
                    continue
                quiet_since = time.monotonic()
                try:
                    producer.begin_transaction()
                    for m in messages:
                        producer.produce(
                            w.relay_topic, b"relay:" + m.value(), partition=m.partition()
                        )
                    positions = {}
                    for m in messages:
                        positions[m.partition()] = m.offset() + 1
                    offsets = [TopicPartition(w.topic, p, o) for p, o in positions.items()]
                    producer.send_offsets_to_transaction(
                        offsets, consumer.consumer_group_metadata(), CALL_TIMEOUT_S
                    )
                    producer.commit_transaction(CALL_TIMEOUT_S)
                except Exception as exc:  # noqa: BLE001 - back to the committed positions
                    producer = self._end_badly(
                        producer, exc, lambda: self._transactional(recorder, tid)
                    )
                    for tp in consumer.committed(consumer.assignment(), CALL_TIMEOUT_S):
                        if tp.offset >= 0:
                            consumer.seek(tp)
            consumer.close()

    def _done(self, consumer: Any, upstream: threading.Event, quiet_since: float) -> bool:
        if self.stop.is_set():
            return True
        if not upstream.is_set():
            return False
        return read_to_the_end(consumer) or time.monotonic() - quiet_since > self.w.drain_s

    def read(self, i: int) -> None:
        w = self.w
        topics = [w.topic, w.relay_topic] if w.relay else [w.topic]
        with self._recorder(f"reader-{i}") as recorder:
            consumer = recorder.consumer(
                {**self.config, "group.id": f"{w.prefix}-reader-{i}",
                 "auto.offset.reset": "earliest", "isolation.level": "read_committed"}
            )  # fmt: skip
            consumer.subscribe(topics)
            upstream = self.relay_done if w.relay else self.producers_done
            quiet_since = time.monotonic()
            while not self._done(consumer, upstream, quiet_since):
                if any(m.error() is None for m in consumer.consume(100, 0.5)):
                    quiet_since = time.monotonic()
            consumer.close()

    def guarded(self, name: str, work: Callable[[], None]) -> Callable[[], None]:
        def body() -> None:
            try:
                work()
            except Exception as exc:  # noqa: BLE001 - reported by run()
                self.errors.append(f"{name}: {type(exc).__name__}: {exc}")

        return body


def read_to_the_end(consumer: Any, watermarks: Any = None) -> bool:
    """Whether the consumer's position in every partition it has is at its end, as
    `watermarks` (a consumer; default: this one) gets it from the leaders: a read_committed
    consumer's own end is the last stable offset, a read_uncommitted one's the high watermark
    (the same once every transaction has ended)."""
    assigned = consumer.assignment()
    if not assigned:
        return False
    try:
        for tp in consumer.position(assigned):
            _, high = (watermarks or consumer).get_watermark_offsets(tp, CALL_TIMEOUT_S)
            if tp.offset < high:
                return False
    except Exception:  # noqa: BLE001 - a broker gone meanwhile: not known to be at the end
        return False
    return True


def run(w: TxnWorkload, config: Mapping[str, Any], folder: Path) -> ClientHistory:
    """Runs the workload against the cluster `config` (a confluent-kafka configuration with
    bootstrap.servers and any security settings; the topics exist) and returns its history,
    also kept as JSON lines in `folder`. Raises RuntimeError if a client thread failed outside
    a transaction (its history up to then is in `folder`)."""
    folder.mkdir(parents=True, exist_ok=True)
    state = _Run(w, config, folder)
    producers = [
        threading.Thread(target=state.guarded(f"producer {i}", functools.partial(state.produce, i)))
        for i in range(w.producers)
    ]
    others = [
        threading.Thread(target=state.guarded(f"reader {i}", functools.partial(state.read, i)))
        for i in range(w.readers)
    ]
    relay = [threading.Thread(target=state.guarded("relay", state.relay))] if w.relay else []
    for t in producers + relay + others:
        t.start()
    deadline = time.monotonic() + w.deadline_s
    for stage, done in ((producers, state.producers_done), (relay, state.relay_done)):
        for t in stage:
            t.join(max(0.0, deadline - time.monotonic()))
        done.set()
    for t in others:
        t.join(max(0.0, deadline - time.monotonic()))
    state.stop.set()
    for t in producers + relay + others:
        t.join(CALL_TIMEOUT_S * 2)
    if state.errors:
        raise RuntimeError("; ".join(state.errors))
    return load(sorted(folder.glob("*.jsonl")))
