"""kafka-python clients that record: each send with its future's outcome, each record a poll or
an iteration returns, commits, transactions and assignments. The rest passes through."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
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


def outcome_of(exc: BaseException) -> str:
    """fail for an error after which the record certainly is not in the log, else info."""
    return INFO if getattr(exc, "retriable", False) or "Timeout" in type(exc).__name__ else FAIL


def read_op(name: str, group: str, read_committed: bool, r: Any, now: int) -> Read:
    """A kafka-python or aiokafka ConsumerRecord as a Read."""
    return Read(
        name, group, r.topic, r.partition, r.offset, as_bytes(r.key), as_bytes(r.value), now,
        read_committed,
    )  # fmt: skip


def offsets_of(offsets: Mapping[Any, Any]) -> tuple[tuple[str, int, int], ...]:
    """{TopicPartition: OffsetAndMetadata or int} as (topic, partition, offset)."""
    return tuple(
        (tp.topic, tp.partition, int(getattr(o, "offset", o))) for tp, o in offsets.items()
    )


class SendRecording:
    """What the kafka-python and aiokafka producers share: sends and transactions."""

    def __init__(self, recorder: Recording, config: Mapping[str, Any]) -> None:
        self._recorder = recorder
        self.name = recorder.client_name("producer")
        # What a reader without a deserializer gets: the serialized bytes.
        self._key_serializer = config.get("key_serializer")
        self._value_serializer = config.get("value_serializer")
        self._seq = itertools.count()
        self._txns = itertools.count(1)
        self._txn = ""
        self._txn_begin_ms = 0

    def _invoked(self, topic: str, value: Any, key: Any, partition: Any) -> Send:
        if self._key_serializer is not None and key is not None:
            key = self._key_serializer(key)
        if self._value_serializer is not None and value is not None:
            value = self._value_serializer(value)
        send = Send(
            f"{self.name}:{next(self._seq)}", self.name, topic, as_bytes(key), as_bytes(value),
            self._recorder.now_ms(), partition=-1 if partition is None else partition,
            txn=self._txn,
        )  # fmt: skip
        self._recorder.record(send)
        return send

    def _acked(self, send: Send, metadata: Any) -> None:
        self._recorder.record(
            Send(
                send.id, send.client, send.topic, send.key, send.value, send.invoke_ms, OK,
                metadata.partition, metadata.offset, self._recorder.now_ms(), txn=send.txn,
            )
        )  # fmt: skip

    def _failed(self, send: Send, exc: BaseException) -> None:
        self._recorder.record(
            Send(
                send.id, send.client, send.topic, send.key, send.value, send.invoke_ms,
                outcome_of(exc), send.partition, -1, self._recorder.now_ms(),
                type(exc).__name__, send.txn,
            )
        )  # fmt: skip

    def _begun(self) -> None:
        self._txn = f"{self.name}#{next(self._txns)}"
        self._txn_begin_ms = self._recorder.now_ms()

    def _ended(self, outcome: str, error: str = "") -> None:
        self._recorder.record(
            Txn(self.name, self._txn, self._txn_begin_ms, self._recorder.now_ms(), outcome, error)
        )

    def _txn_offsets(self, offsets: Mapping[Any, Any], group: str) -> None:
        self._recorder.record(
            Commit(self.name, group, offsets_of(offsets), self._recorder.now_ms(), OK, self._txn)
        )


class RecordingKafkaProducer(SendRecording):
    """A kafka.KafkaProducer that records."""

    def __init__(self, recorder: Recording, config: Mapping[str, Any]) -> None:
        from kafka import KafkaProducer

        super().__init__(recorder, config)
        self._client = KafkaProducer(**config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def send(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any:
        send = self._invoked(topic, value, key, kw.get("partition"))
        try:
            future = self._client.send(topic, value=value, key=key, **kw)
        except Exception as exc:
            self._failed(send, exc)
            raise
        future.add_callback(lambda metadata: self._acked(send, metadata))
        future.add_errback(lambda exc: self._failed(send, exc))
        return future

    def begin_transaction(self) -> None:
        self._client.begin_transaction()
        self._begun()

    def commit_transaction(self) -> None:
        try:
            self._client.commit_transaction()
        except Exception as exc:
            self._ended(INFO, str(exc))
            raise
        self._ended(COMMITTED)

    def abort_transaction(self) -> None:
        self._client.abort_transaction()
        self._ended(ABORTED)

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: str) -> None:
        self._client.send_offsets_to_transaction(offsets, group_id)
        self._txn_offsets(offsets, group_id)


class ReadRecording:
    """What the kafka-python and aiokafka consumers share: their reads, commits and
    assignments."""

    def __init__(self, recorder: Recording, config: Mapping[str, Any]) -> None:
        self._recorder = recorder
        self.name = recorder.client_name("consumer")
        self.group = str(config.get("group_id") or "")
        self.read_committed = config.get("isolation_level") == "read_committed"
        self._idle = IdlePolls(recorder, self.name, self.group, self.read_committed)

    def _read(self, r: Any) -> Any:
        self._recorder.record(
            read_op(self.name, self.group, self.read_committed, r, self._recorder.now_ms())
        )
        return r

    def _committed(self, offsets: Mapping[Any, Any]) -> None:
        self._recorder.record(
            Commit(self.name, self.group, offsets_of(offsets), self._recorder.now_ms())
        )

    def _assigned(self, partitions: Any) -> None:
        self._recorder.record(
            Assign(
                self.name, self.group, tuple((p.topic, p.partition) for p in partitions),
                self._recorder.now_ms(),
            )
        )  # fmt: skip


class RecordingKafkaConsumer(ReadRecording):
    """A kafka.KafkaConsumer that records."""

    def __init__(
        self, recorder: Recording, topics: tuple[str, ...], config: Mapping[str, Any]
    ) -> None:
        from kafka import KafkaConsumer

        super().__init__(recorder, config)
        self._client = KafkaConsumer(*topics, **config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def poll(self, *args: Any, **kw: Any) -> Any:
        batches = self._client.poll(*args, **kw)
        if not batches:
            self._idle.empty()
        for records in batches.values():
            for r in records:
                self._read(r)
        return batches

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        r = next(self._client)
        self._read(r)
        return r

    def commit(self, offsets: Mapping[Any, Any] | None = None) -> None:
        from kafka.structs import OffsetAndMetadata

        if offsets is None:
            offsets = {
                tp: OffsetAndMetadata(self._client.position(tp), "", -1)
                for tp in self._client.assignment()
            }
        self._client.commit(offsets)
        self._committed(offsets)

    def subscribe(self, topics: Any = (), pattern: Any = None, listener: Any = None) -> None:
        """Each rebalance's assignment is recorded (the position may go back to the
        committed offset)."""
        from kafka import ConsumerRebalanceListener

        recording = self

        class Recorded(ConsumerRebalanceListener):  # type: ignore[misc]
            def on_partitions_revoked(self, revoked: Any) -> None:
                if listener is not None:
                    listener.on_partitions_revoked(revoked)

            def on_partitions_assigned(self, assigned: Any) -> None:
                recording._assigned(assigned)
                if listener is not None:
                    listener.on_partitions_assigned(assigned)

        self._client.subscribe(topics=topics, pattern=pattern, listener=Recorded())

    def assign(self, partitions: Any) -> None:
        self._client.assign(partitions)
        self._assigned(partitions)

    def seek(self, partition: Any, offset: int) -> None:
        self._client.seek(partition, offset)
        self._assigned([partition])

    def seek_to_beginning(self, *partitions: Any) -> None:
        self._client.seek_to_beginning(*partitions)
        self._assigned(partitions or self._client.assignment())

    def seek_to_end(self, *partitions: Any) -> None:
        self._client.seek_to_end(*partitions)
        self._assigned(partitions or self._client.assignment())


__all__ = ["ReadRecording", "RecordingKafkaConsumer", "RecordingKafkaProducer", "SendRecording"]
