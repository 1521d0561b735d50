"""confluent-kafka clients that record: every produce with its delivery report, every record a
poll returns, commits (synchronous, asynchronous, automatic and a transaction's), transactions
and assignments. Anything not recorded passes through to the wrapped client unchanged.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from typing import Any

from minibroker.history.model import (
    ABORTED,
    COMMITTED,
    FAIL,
    INFO,
    OK,
    Assign,
    Commit,
    IdlePolls,
    Read,
    Recording,
    Send,
    Txn,
    as_bytes,
)

# Errors after which a send certainly did not reach a log (librdkafka's and Kafka's codes by
# name). Every other error is indefinite (Jepsen's :info): a timed-out or disconnected send
# may have been written.
DEFINITE = frozenset(
    {
        "MSG_SIZE_TOO_LARGE", "_MSG_SIZE_TOO_LARGE", "INVALID_MSG", "INVALID_MSG_SIZE",
        "CORRUPT_MESSAGE", "RECORD_LIST_TOO_LARGE", "INVALID_RECORD", "_INVALID_ARG",
        "TOPIC_AUTHORIZATION_FAILED", "CLUSTER_AUTHORIZATION_FAILED", "UNKNOWN_TOPIC_OR_PART",
        "_UNKNOWN_TOPIC", "_UNKNOWN_PARTITION", "INVALID_REQUIRED_ACKS", "NOT_ENOUGH_REPLICAS",
        "_PURGE_QUEUE", "INVALID_TXN_STATE", "PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH",
        "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", "_FENCED",
    }
)  # fmt: skip


def outcome_of(error: Any) -> str:
    """fail or info for a confluent-kafka KafkaError."""
    return FAIL if error.name() in DEFINITE else INFO


def _offsets(partitions: Any) -> tuple[tuple[str, int, int], ...]:
    return tuple(
        (tp.topic, tp.partition, tp.offset)
        for tp in partitions or ()
        if tp.offset >= 0 and not tp.error
    )


class RecordingProducer:
    """A confluent_kafka.Producer that records each send and transaction."""

    def __init__(self, recorder: Recording, config: Mapping[str, Any], client: Any) -> None:
        if client is None:
            from confluent_kafka import Producer

            client = Producer(dict(config))
        self._client = client
        self._recorder = recorder
        self.name = recorder.client_name("producer")
        self._seq = itertools.count()
        self._txns = itertools.count(1)
        self._txn = ""
        self._txn_begin_ms = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def __len__(self) -> int:
        return len(self._client)

    def produce(
        self, topic: str, value: Any = None, key: Any = None, *args: Any, **kw: Any
    ) -> None:
        names = ("partition", "on_delivery", "timestamp", "headers")
        kw.update(zip(names, args, strict=False))
        user: Callable[..., Any] | None = kw.pop("on_delivery", None) or kw.pop("callback", None)
        send = Send(
            f"{self.name}:{next(self._seq)}", self.name, topic, as_bytes(key), as_bytes(value),
            self._recorder.now_ms(), partition=kw.get("partition", -1), txn=self._txn,
        )  # fmt: skip
        recorder = self._recorder

        def delivered(error: Any, message: Any) -> None:
            done = recorder.now_ms()
            if error is None:
                recorder.record(
                    Send(
                        send.id, send.client, send.topic, send.key, send.value, send.invoke_ms,
                        OK, message.partition(), message.offset(), done, txn=send.txn,
                    )
                )  # fmt: skip
            else:
                recorder.record(
                    Send(
                        send.id, send.client, send.topic, send.key, send.value, send.invoke_ms,
                        outcome_of(error), send.partition, -1, done, error.name(), send.txn,
                    )
                )  # fmt: skip
            if user is not None:
                user(error, message)

        recorder.record(send)  # before produce(): another thread's poll may deliver it at once
        try:
            self._client.produce(topic, value, key, on_delivery=delivered, **kw)
        except Exception as exc:  # BufferError, KafkaException: refused, never sent
            recorder.record(
                Send(
                    send.id, send.client, send.topic, send.key, send.value, send.invoke_ms, FAIL,
                    send.partition, -1, recorder.now_ms(), type(exc).__name__, send.txn,
                )
            )  # fmt: skip
            raise

    def begin_transaction(self) -> None:
        self._client.begin_transaction()
        self._txn = f"{self.name}#{next(self._txns)}"
        self._txn_begin_ms = self._recorder.now_ms()

    def _end(self, outcome: str, error: str = "") -> None:
        self._recorder.record(
            Txn(self.name, self._txn, self._txn_begin_ms, self._recorder.now_ms(), outcome, error)
        )

    def commit_transaction(self, *args: Any) -> None:
        try:
            self._client.commit_transaction(*args)
        except Exception as exc:
            self._end(INFO, str(exc))  # an abort that follows makes it aborted
            raise
        self._end(COMMITTED)

    def abort_transaction(self, *args: Any) -> None:
        self._client.abort_transaction(*args)
        self._end(ABORTED)

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any, *args: Any) -> None:
        self._client.send_offsets_to_transaction(offsets, group_metadata, *args)
        self._recorder.record(
            Commit(
                self.name, self._recorder.group_of(group_metadata), _offsets(offsets),
                self._recorder.now_ms(), OK, self._txn,
            )
        )  # fmt: skip


class RecordingConsumer:
    """A confluent_kafka.Consumer that records the records it returns, its commits and its
    assignments."""

    def __init__(self, recorder: Recording, config: Mapping[str, Any], client: Any) -> None:
        config = dict(config)
        self._recorder = recorder
        self.name = recorder.client_name("consumer")
        self.group = str(config.get("group.id", ""))
        # librdkafka's default isolation.level is read_committed
        self.read_committed = config.get("isolation.level", "read_committed") == "read_committed"
        if client is None:
            from confluent_kafka import Consumer

            user = config.get("on_commit")

            def committed(error: Any, partitions: Any) -> None:
                if error is None:
                    self._commit(partitions)
                if user is not None:
                    user(error, partitions)

            config["on_commit"] = committed  # automatic and asynchronous commits
            client = Consumer(config)
        self._client = client
        self._idle = IdlePolls(recorder, self.name, self.group, self.read_committed)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _commit(self, partitions: Any) -> None:
        offsets = _offsets(partitions)
        if offsets:
            self._recorder.record(Commit(self.name, self.group, offsets, self._recorder.now_ms()))

    def _read(self, m: Any) -> None:
        if m is not None and m.error() is None:
            self._recorder.record(
                Read(
                    self.name, self.group, m.topic(), m.partition(), m.offset(), as_bytes(m.key()),
                    as_bytes(m.value()), self._recorder.now_ms(), self.read_committed,
                )
            )  # fmt: skip

    def poll(self, *args: Any, **kw: Any) -> Any:
        m = self._client.poll(*args, **kw)
        if m is None:
            self._idle.empty()
        self._read(m)
        return m

    def consume(self, *args: Any, **kw: Any) -> Any:
        messages = self._client.consume(*args, **kw)
        if not messages:
            self._idle.empty()
        for m in messages:
            self._read(m)
        return messages

    def commit(self, *args: Any, **kw: Any) -> Any:
        result = self._client.commit(*args, **kw)
        if result is not None:  # synchronous: the offsets it committed
            self._commit(result)
        return result

    def _assigned(self, partitions: Any) -> None:
        self._recorder.record(
            Assign(
                self.name, self.group, tuple((tp.topic, tp.partition) for tp in partitions),
                self._recorder.now_ms(),
            )
        )  # fmt: skip

    def subscribe(self, topics: Any, on_assign: Any = None, *args: Any, **kw: Any) -> None:
        def assigned(consumer: Any, partitions: Any) -> None:
            self._assigned(partitions)
            if on_assign is not None:
                on_assign(consumer, partitions)

        self._client.subscribe(topics, assigned, *args, **kw)

    def assign(self, partitions: Any) -> None:
        self._client.assign(partitions)
        self._assigned(partitions)

    def seek(self, partition: Any) -> None:
        self._client.seek(partition)
        self._assigned([partition])

    def consumer_group_metadata(self) -> Any:
        metadata = self._client.consumer_group_metadata()
        self._recorder.remember_group(metadata, self.group)
        return metadata
