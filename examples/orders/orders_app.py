"""orders -> invoices: a small service of the kind many teams run. It consumes `orders` (JSON:
id, customer, quantity, unit price), computes each order's invoice, produces it to `invoices`
under the order's key, and commits its progress. Three ways to do that:

  at-least-once   produce the batch's invoices, wait for them, then commit the offsets:
                  a crash repeats some invoices, never skips one.
  exactly-once    consume-transform-produce in a transaction (the offsets committed in it):
                  read_committed readers see each invoice once.
  commit-first    commit the offsets, then produce: the deliberate bug. A crash between the
                  commit and the invoices skips orders for good.

It runs until SIGTERM (then finishes its batch and leaves its group). It knows nothing of
minibroker; `--record FILE` (the tests' hook) wraps its clients in
minibroker.history's recorders so the test can check what it did.

    python orders_app.py --bootstrap 127.0.0.1:9092 --mode exactly-once
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

MODES = ("at-least-once", "exactly-once", "commit-first")
BATCH = 50
STUCK_S = 20  # a transaction's last steps (10 s timeouts each) taking longer: stuck
# A commit refused because the group moved on (this member's session expired while its
# coordinator was away, or a rebalance began): the partitions are someone else's now, and the
# batch will be processed again from the last commit. Not fatal (Kafka's CommitFailedException).
REBALANCED = {
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError._ASSIGNMENT_LOST,
}


def invoice_for(order: dict[str, Any]) -> dict[str, Any]:
    """The business rule: 20% tax, rounded to the cent."""
    net = order["quantity"] * order["unit_price"]
    return {"order": order["id"], "customer": order["customer"], "total": round(net * 1.2, 2)}


def process(message: Any, producer: Any, work_ms: int) -> None:
    time.sleep(work_ms / 1000)  # the work a real service does per order
    invoice = invoice_for(json.loads(message.value()))
    producer.produce("invoices", json.dumps(invoice).encode(), key=message.key())


def commit(consumer: Any) -> None:
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() not in REBALANCED:
            raise
        print(
            f"commit refused ({exc.args[0].name()}): the batch will be processed again", flush=True
        )


@contextlib.contextmanager
def watchdog(seconds: float) -> Iterator[None]:
    """Exits the process (status 3: restart me) if the block takes longer than `seconds`.
    librdkafka's send_offsets_to_transaction can block for good, past its timeout, when the
    group coordinator's broker died and left the cluster's metadata (librdkafka issues
    #5456 and #5511); found by this example's coordinator-crash test. A supervisor restarts
    the service, and init_transactions fences the stuck run's transaction."""
    timer = threading.Timer(seconds, _stuck, (seconds,))
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()


def _stuck(seconds: float) -> None:
    print(f"a transaction step blocked for {seconds} s: exiting to be restarted", flush=True)
    os._exit(3)


def finish_transaction(producer: Any, consumer: Any) -> bool:
    """Commits the batch's offsets in the transaction and the transaction; True if it
    committed. A retriable error repeats the step (as librdkafka's transactional examples
    do), one that requires an abort aborts and rewinds to the committed offsets."""
    positions = consumer.position(consumer.assignment())
    metadata = consumer.consumer_group_metadata()
    steps: list[Callable[[], object]] = [
        functools.partial(producer.send_offsets_to_transaction, positions, metadata, 10),
        functools.partial(producer.commit_transaction, 10),
    ]
    for step in steps:
        deadline = time.monotonic() + 60
        while True:
            try:
                with watchdog(STUCK_S):
                    step()
                break
            except KafkaException as exc:
                error = exc.args[0]
                if error.retriable() and time.monotonic() < deadline:
                    continue
                if not error.txn_requires_abort():
                    raise
                print(f"transaction aborted ({error.name()}): the batch again", flush=True)
                producer.abort_transaction(30)
                rewind(consumer)
                return False
    return True


def rewind(consumer: Any) -> None:
    """Back to the last committed offsets (after an aborted transaction)."""
    for tp in consumer.committed(consumer.assignment(), 30):
        consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))


class Stop:
    """Set by SIGTERM: the service finishes its batch, then closes its clients."""

    requested = False

    @classmethod
    def on_signal(cls, *_: object) -> None:
        cls.requested = True


def run(consumer: Any, producer: Any, mode: str, *, work_ms: int) -> int:
    """Processes orders until SIGTERM; returns how many it processed."""
    if mode == "exactly-once":
        producer.init_transactions(30)
    consumer.subscribe(["orders"])
    done = 0
    while not Stop.requested:
        batch = [m for m in consumer.consume(BATCH, 0.5) if m.error() is None]
        if not batch:
            continue
        if mode == "commit-first":
            commit(consumer)
            for m in batch:
                process(m, producer, work_ms)
            producer.flush(60)
        elif mode == "at-least-once":
            for m in batch:
                process(m, producer, work_ms)
            if producer.flush(60):
                raise SystemExit("invoices not delivered in 60 s: exiting without a commit")
            commit(consumer)
        else:
            producer.begin_transaction()
            for m in batch:
                process(m, producer, work_ms)
            if not finish_transaction(producer, consumer):
                continue
        done += len(batch)
        print(f"processed {done}", flush=True)
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap", required=True, help="Kafka bootstrap servers")
    parser.add_argument("--mode", choices=MODES, default="at-least-once")
    parser.add_argument("--group", default="orders-app")
    parser.add_argument("--transactional-id", default="orders-app")
    parser.add_argument("--work-ms", type=int, default=10, help="processing time per order")
    parser.add_argument("--record", help="record the clients' history to this file")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, Stop.on_signal)
    print("started", flush=True)  # from here a SIGTERM stops it cleanly
    consumer_config = {
        "bootstrap.servers": args.bootstrap, "group.id": args.group,
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "isolation.level": "read_committed", "session.timeout.ms": 6000,
    }  # fmt: skip
    producer_config = {"bootstrap.servers": args.bootstrap, "acks": "all", "linger.ms": 5}
    if args.mode == "exactly-once":
        producer_config["transactional.id"] = args.transactional_id
    else:
        producer_config["enable.idempotence"] = True
    if args.record:
        from minibroker.history import HistoryRecorder

        recorder = HistoryRecorder(args.record)
        consumer, producer = recorder.consumer(consumer_config), recorder.producer(producer_config)
    else:
        consumer, producer = Consumer(consumer_config), Producer(producer_config)
    try:
        run(consumer, producer, args.mode, work_ms=args.work_ms)
    finally:
        consumer.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
