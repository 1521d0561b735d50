"""The data source's write path through the brokers' KAFKA listeners (`protocol=kafka`, the
load generator's `--protocol kafka`): kafka-python's KafkaProducer, an unmodified Kafka client,
sends the task's records, and every record's fate lands in the same ledger as on the gRPC path,
so verification is the same. Plain functions over plain values; no pyspark here.

kafka-python calls a future's callbacks on its sender thread; the ledger is filled there, under
a lock, and read only after flush() returned and close() joined that thread.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from loadgen.source_io import Ledger, OutRecord, value_digest
from loadgen.source_options import MinibrokerSourceError, WriteOptions
from minibroker.client import RecordMetadata
from minibroker.core.errors import ErrorCode
from minibroker.runtime.clock import now_ms
from minibroker.security.client_config import read_properties

_ACKS: dict[int, Any] = {-1: "all", 1: 1, 0: 0}


class KafkaClientError(Exception):
    """A record kafka-python failed, for the ledger: Kafka's error code name when the broker
    answered with one (NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, ...), else the client's own
    exception class name (KafkaTimeoutError: delivery.timeout.ms passed)."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__(f"{type(exc).__name__}: {exc}")
        errno = getattr(exc, "errno", None)
        if isinstance(errno, int) and errno in ErrorCode._value2member_map_:
            self.ledger_name = ErrorCode(errno).name
        else:
            self.ledger_name = type(exc).__name__


def producer_config(options: WriteOptions) -> dict[str, Any]:
    """kafka-python's settings for the sink's options (Kafka's names, snake-cased). Idempotence
    is kafka-python's default and needs acks=all, so it is on exactly then. With a
    `command.config` file, its security settings (SASL_SSL with SCRAM, SSL with a client
    certificate, ...) as kafka-python names them."""
    security: dict[str, Any] = {}
    if options.command_config:
        try:
            security = read_properties(Path(options.command_config)).kafka_python()
        except (OSError, ValueError) as exc:
            raise MinibrokerSourceError(f"option 'command.config': {exc}") from None
    return security | {
        "bootstrap_servers": options.bootstrap.split(","),
        "acks": _ACKS[options.acks],
        "linger_ms": options.linger_ms,
        "batch_size": options.batch_size,
        "request_timeout_ms": options.request_timeout_ms,
        "delivery_timeout_ms": options.delivery_timeout_ms,
        "max_block_ms": options.max_block_ms,
        "enable_idempotence": options.acks == -1,
    }


class _KafkaRecorder:
    def __init__(self) -> None:
        self.ledger = Ledger()
        self._lock = threading.Lock()

    def track(self, record: OutRecord, send_ms: int, future: Any) -> None:
        digest = value_digest(record.value)

        def acked(md: Any) -> None:
            meta = RecordMetadata(md.topic, md.partition, md.offset, md.timestamp)
            with self._lock:
                self.ledger.add(record, digest, send_ms, now_ms(), meta)

        future.add_callback(acked)
        future.add_errback(lambda exc: self.failed(record, digest, send_ms, exc))

    def failed(self, record: OutRecord, digest: str | None, send_ms: int, exc: Any) -> None:
        with self._lock:
            self.ledger.add(record, digest, send_ms, now_ms(), KafkaClientError(exc))


def produce_records_kafka(
    records: Iterable[OutRecord], options: WriteOptions, task: int = 0
) -> Ledger:
    """Send every record through one KafkaProducer, flush, and return the ledger. Raises
    MinibrokerSourceError only when a topic cannot be written at all. With a transactional
    id, in transactions (produce_transactionally, confluent-kafka's producer)."""
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    if options.transactional_id is not None:
        return produce_transactionally(records, options, task)
    try:
        producer = KafkaProducer(**producer_config(options))
    except KafkaError as exc:
        raise MinibrokerSourceError(
            f"cannot reach any broker's Kafka listener at {options.bootstrap}: {exc}"
        ) from None
    recorder = _KafkaRecorder()
    checked: set[str] = set()
    try:
        for record in records:
            if record.topic not in checked:
                _check_topic(producer, record.topic, options, KafkaError)
                checked.add(record.topic)
            send_ms = now_ms()
            try:
                future = producer.send(
                    record.topic, record.value, key=record.key, partition=record.partition
                )
            except KafkaError as exc:  # refused before it was queued (too large, no metadata)
                recorder.failed(record, value_digest(record.value), send_ms, exc)
                continue
            recorder.track(record, send_ms, future)
        producer.flush()
    finally:
        producer.close()  # joins the sender thread: every callback has run
    return recorder.ledger


def _check_topic(
    producer: Any, topic: str, options: WriteOptions, kafka_error: type[Exception]
) -> None:
    try:
        partitions = producer.partitions_for(topic)
    except kafka_error:
        partitions = None
    if not partitions:
        raise MinibrokerSourceError(
            f"topic {topic!r} is not in the metadata of the Kafka listeners at "
            f"{options.bootstrap} after max.block.ms={options.max_block_ms}; create it first"
        )


def produce_transactionally(
    records: Iterable[OutRecord], options: WriteOptions, task: int
) -> Ledger:
    """Transactions of `transaction.records` records each through confluent-kafka's
    (librdkafka's) transactional producer, whose transactional id is the option's prefix and
    the task's number: begin, send, commit. A record is acknowledged in the ledger only when
    its transaction committed (at the offset its delivery report gave); the records of a
    transaction that aborted or failed are failed, with the error that ended it, so the
    verification expects none of them in a read_committed read. A fenced or otherwise fatal
    producer is replaced by a new one with the same id, as an application must."""
    from confluent_kafka import KafkaException, Producer

    security: dict[str, str] = {}
    if options.command_config:
        try:
            security = read_properties(Path(options.command_config)).confluent()
        except (OSError, ValueError) as exc:
            raise MinibrokerSourceError(f"option 'command.config': {exc}") from None
    config = security | {
        "bootstrap.servers": options.bootstrap,
        "transactional.id": f"{options.transactional_id}-{task}",
        "linger.ms": options.linger_ms,
        "request.timeout.ms": options.request_timeout_ms,
        "delivery.timeout.ms": options.delivery_timeout_ms,
        # librdkafka: a record may not outlive its transaction.
        "transaction.timeout.ms": max(60_000, options.delivery_timeout_ms),
    }
    ledger = Ledger()
    batch: list[tuple[OutRecord, int]] = []
    delivered: dict[int, Any] = {}  # index in the batch -> RecordMetadata or the error

    def new_producer() -> Any:
        producer = Producer(config)
        producer.init_transactions(options.delivery_timeout_ms / 1000)
        return producer

    def report(i: int) -> Any:
        def on_delivery(err: Any, msg: Any) -> None:
            if err is not None:
                delivered[i] = KafkaClientError(KafkaException(err))
            else:
                delivered[i] = RecordMetadata(
                    msg.topic(), msg.partition(), msg.offset(), msg.timestamp()[1]
                )

        return on_delivery

    def finish(producer: Any) -> Any:
        error: BaseException | None = None
        try:
            producer.commit_transaction(options.delivery_timeout_ms / 1000)
        except KafkaException as exc:
            error = KafkaClientError(exc)
            try:
                if exc.args[0].txn_requires_abort():
                    producer.abort_transaction(options.delivery_timeout_ms / 1000)
                else:
                    producer = new_producer()  # fatal (fenced): a new instance takes over
            except KafkaException:
                producer = new_producer()
        done = now_ms()
        for i, (record, send_ms) in enumerate(batch):
            outcome = error or delivered.get(i) or KafkaClientError(RuntimeError("no report"))
            ledger.add(record, value_digest(record.value), send_ms, done, outcome)
        batch.clear()
        delivered.clear()
        return producer

    producer = new_producer()
    for record in records:
        if not batch:
            producer.begin_transaction()
        send_ms = now_ms()
        kwargs = {} if record.partition is None else {"partition": record.partition}
        producer.produce(
            record.topic, record.value, record.key, on_delivery=report(len(batch)), **kwargs
        )
        producer.poll(0)
        batch.append((record, send_ms))
        if len(batch) >= options.transaction_records:
            producer = finish(producer)
    if batch:
        producer = finish(producer)
    producer.flush(options.delivery_timeout_ms / 1000)
    return ledger
