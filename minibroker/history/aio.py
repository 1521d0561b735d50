"""aiokafka clients that record: each send with its outcome, each record getone/getmany or an
`async for` returns, commits, transactions and seeks. The rest passes through."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from minibroker.history.kafka_python import ReadRecording, SendRecording
from minibroker.history.model import ABORTED, COMMITTED, INFO, Recording


class RecordingAIOProducer(SendRecording):
    """An aiokafka.AIOKafkaProducer that records."""

    def __init__(self, recorder: Recording, config: Mapping[str, Any]) -> None:
        from aiokafka import AIOKafkaProducer

        super().__init__(recorder, config)
        self._client = AIOKafkaProducer(**config)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def send_and_wait(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any:
        send = self._invoked(topic, value, key, kw.get("partition"))
        try:
            metadata = await self._client.send_and_wait(topic, value=value, key=key, **kw)
        except Exception as exc:
            self._failed(send, exc)
            raise
        self._acked(send, metadata)
        return metadata

    async def send(self, topic: str, value: Any = None, key: Any = None, **kw: Any) -> Any:
        """The send's future, its outcome recorded when it completes."""
        send = self._invoked(topic, value, key, kw.get("partition"))
        try:
            future = await self._client.send(topic, value=value, key=key, **kw)
        except Exception as exc:
            self._failed(send, exc)
            raise

        def done(f: Any) -> None:
            if f.cancelled() or f.exception() is not None:
                self._failed(send, f.exception() or TimeoutError("cancelled"))
            else:
                self._acked(send, f.result())

        future.add_done_callback(done)
        return future

    async def begin_transaction(self) -> None:
        await self._client.begin_transaction()
        self._begun()

    async def commit_transaction(self) -> None:
        try:
            await self._client.commit_transaction()
        except Exception as exc:
            self._ended(INFO, str(exc))
            raise
        self._ended(COMMITTED)

    async def abort_transaction(self) -> None:
        await self._client.abort_transaction()
        self._ended(ABORTED)

    async def send_offsets_to_transaction(self, offsets: Mapping[Any, Any], group_id: str) -> None:
        await self._client.send_offsets_to_transaction(offsets, group_id)
        self._txn_offsets(offsets, group_id)


class RecordingAIOConsumer(ReadRecording):
    """An aiokafka.AIOKafkaConsumer that records."""

    def __init__(
        self, recorder: Recording, topics: tuple[str, ...], config: Mapping[str, Any]
    ) -> None:
        from aiokafka import AIOKafkaConsumer

        super().__init__(recorder, config)
        self._client = AIOKafkaConsumer(**config)
        if topics:  # subscribed with a listener: each rebalance's assignment is recorded
            self.subscribe(list(topics))

    def subscribe(self, topics: Any = (), pattern: Any = None, listener: Any = None) -> None:
        from aiokafka.abc import ConsumerRebalanceListener

        recording = self

        class Recorded(ConsumerRebalanceListener):  # type: ignore[misc]
            async def on_partitions_revoked(self, revoked: Any) -> None:
                if listener is not None:
                    await listener.on_partitions_revoked(revoked)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                recording._assigned(assigned)
                if listener is not None:
                    await listener.on_partitions_assigned(assigned)

        self._client.subscribe(topics=topics or (), pattern=pattern, listener=Recorded())

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    async def getone(self, *partitions: Any) -> Any:
        return self._read(await self._client.getone(*partitions))

    async def getmany(self, *partitions: Any, **kw: Any) -> Any:
        batches = await self._client.getmany(*partitions, **kw)
        if not batches:
            self._idle.empty()
        for records in batches.values():
            for r in records:
                self._read(r)
        return batches

    def __aiter__(self) -> RecordingAIOConsumer:
        return self

    async def __anext__(self) -> Any:
        return self._read(await self._client.__anext__())

    async def commit(self, offsets: Mapping[Any, Any] | None = None) -> None:
        if offsets is None:
            offsets = {tp: await self._client.position(tp) for tp in self._client.assignment()}
        await self._client.commit(offsets)
        self._committed(offsets)

    async def seek_to_beginning(self, *partitions: Any) -> None:
        await self._client.seek_to_beginning(*partitions)
        self._assigned(partitions or self._client.assignment())

    async def seek_to_end(self, *partitions: Any) -> None:
        await self._client.seek_to_end(*partitions)
        self._assigned(partitions or self._client.assignment())

    async def seek_to_committed(self, *partitions: Any) -> Any:
        got = await self._client.seek_to_committed(*partitions)
        self._assigned(partitions or self._client.assignment())
        return got

    def seek(self, partition: Any, offset: int) -> None:
        self._client.seek(partition, offset)
        self._assigned([partition])
