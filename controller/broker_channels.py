"""The controller's request channels to brokers (Kafka's ControllerChannelManager, §5.9).

One queue and one sending task per broker; requests go out in order and each is retried every
100 ms until the broker answers or is removed. Requests are built when queued, from the
controller's view at that moment, and carry its epoch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable
from typing import Any

import grpc

from controller.logic.batch import RequestBatch
from controller.logic.context import ControllerContext
from minibroker.core.errors import error_name
from minibroker.core.listeners import Endpoint
from minibroker.core.types import LEADER_DURING_DELETE, TopicPartition
from minibroker.rpc import control_pb2, control_pb2_grpc
from minibroker.runtime import grpc_security
from minibroker.runtime import logging as slog
from minibroker.runtime.grpc_options import channel_options

RETRY_BACKOFF_S = 0.1
REQUEST_TIMEOUT_S = 30.0


class BrokerChannel:
    def __init__(self, broker_id: int, address: str, controller_id: int) -> None:
        self.broker_id = broker_id
        self.address = address
        self.controller_id = controller_id
        # (request kind, request, a future for its answer or None)
        self.queue: asyncio.Queue[tuple[str, Any, asyncio.Future[Any] | None]] = asyncio.Queue()
        self._channel = grpc_security.aio_channel(address, options=channel_options())
        self._stub = control_pb2_grpc.ControlStub(self._channel)
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        await self._channel.close()

    async def _run(self) -> None:
        while True:
            kind, request, answered = await self.queue.get()
            while True:
                try:
                    response = await getattr(self._stub, kind)(request, timeout=REQUEST_TIMEOUT_S)
                    break
                except grpc.aio.AioRpcError:
                    await asyncio.sleep(RETRY_BACKOFF_S)
            error = int(response.error_code)
            if answered is not None and not answered.done():
                answered.set_result(response)
            slog.event(
                "request_sent",
                logging.INFO if error == 0 else logging.WARNING,
                request=kind,
                broker=self.broker_id,
                error=error_name(error),
                **_summary(kind, request),
            )


def _summary(kind: str, request: Any) -> dict[str, Any]:
    if kind == "StopReplica" or kind == "LeaderAndIsr":
        parts = [
            f"{t.topic_name}-{p.partition_index}"
            for t in request.topic_states
            for p in t.partition_states
        ]
        return {"controller_epoch": request.controller_epoch, "partitions": parts}
    return {
        "controller_epoch": request.controller_epoch,
        "partitions": sum(len(t.partition_states) for t in request.topic_states),
        "live_brokers": [b.id for b in request.live_brokers],
    }


class ChannelManager:
    def __init__(self, controller_id: int) -> None:
        self.controller_id = controller_id
        self.channels: dict[int, BrokerChannel] = {}

    def sync(self, ctx: ControllerContext) -> None:
        """Channels for exactly the registered brokers (a new address means a new channel)."""
        for b, channel in list(self.channels.items()):
            info = ctx.live_brokers.get(b)
            if info is None or f"{info.host}:{info.port}" != channel.address:
                self._close_later(self.channels.pop(b))
        for b, info in ctx.live_brokers.items():
            if b not in self.channels:
                self.channels[b] = BrokerChannel(b, f"{info.host}:{info.port}", self.controller_id)

    def _close_later(self, channel: BrokerChannel) -> None:
        task = asyncio.ensure_future(channel.close())
        task.add_done_callback(lambda _t: None)

    async def close_all(self) -> None:
        for channel in list(self.channels.values()):
            await channel.close()
        self.channels.clear()

    def send(
        self,
        ctx: ControllerContext,
        batch: RequestBatch,
        on_stop_replica: Callable[[int, Any], None] | None = None,
    ) -> dict[int, asyncio.Future[Any]]:
        """LeaderAndIsr, then UpdateMetadata, then StopReplica (reference §5.9). Returns, per
        broker sent UpdateMetadata, a future of its answer; `on_stop_replica(broker, answer)`
        is called with each StopReplica answer that carries a deletion (Kafka's callback of
        the topic deletion manager)."""
        self.sync(ctx)
        for b, tps in sorted(batch.leader_and_isr.items()):
            if b in self.channels:
                self.channels[b].queue.put_nowait(
                    (
                        "LeaderAndIsr",
                        leader_and_isr_request(ctx, self.controller_id, b, tps, batch.is_new),
                        None,
                    )
                )
        update = update_metadata_request(ctx, self.controller_id, batch.update_metadata_partitions)
        answers: dict[int, asyncio.Future[Any]] = {}
        for b in sorted(batch.update_metadata_to):
            if b in self.channels:
                request = control_pb2.UpdateMetadataRequest()
                request.CopyFrom(update)
                request.broker_epoch = ctx.live_brokers[b].epoch
                answers[b] = asyncio.get_running_loop().create_future()
                self.channels[b].queue.put_nowait(("UpdateMetadata", request, answers[b]))
        for b, entries in sorted(batch.stop_replica.items()):
            if b in self.channels:
                stop = control_pb2.StopReplicaRequest(
                    controller_id=self.controller_id,
                    controller_epoch=ctx.epoch,
                    broker_epoch=ctx.live_brokers[b].epoch,
                )
                for e in entries:
                    p = stop.topic_states.add(topic_name=e.tp.topic).partition_states.add(
                        partition_index=e.tp.partition, delete_partition=e.delete
                    )
                    p.leader_epoch = e.leader_epoch
                answered = None
                if on_stop_replica is not None and any(e.delete for e in entries):
                    answered = asyncio.get_running_loop().create_future()
                    answered.add_done_callback(_relay(on_stop_replica, b))
                self.channels[b].queue.put_nowait(("StopReplica", stop, answered))
        return answers


def _relay(
    on_answer: Callable[[int, Any], None], broker: int
) -> Callable[[asyncio.Future[Any]], None]:
    def done(answered: asyncio.Future[Any]) -> None:
        if not answered.cancelled():
            on_answer(broker, answered.result())

    return done


def leader_and_isr_request(
    ctx: ControllerContext,
    controller_id: int,
    broker: int,
    tps: Iterable[TopicPartition],
    is_new: set[TopicPartition],
) -> control_pb2.LeaderAndIsrRequest:
    request = control_pb2.LeaderAndIsrRequest(
        controller_id=controller_id,
        controller_epoch=ctx.epoch,
        broker_epoch=ctx.live_brokers[broker].epoch,
    )
    leaders = set()
    for tp in sorted(tps):
        state = ctx.states.get(tp)
        if state is None:
            continue
        leaders.add(state.leader)
        request.topic_states.add(topic_name=tp.topic).partition_states.add(
            partition_index=tp.partition,
            controller_epoch=state.controller_epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            zk_version=state.zk_version,
            replicas=ctx.assignments[tp],
            adding_replicas=ctx.full_assignment(tp).adding,
            removing_replicas=ctx.full_assignment(tp).removing,
            is_new=tp in is_new,
        )
    for b in sorted(leaders):
        info = ctx.live_brokers.get(b)
        if info is not None:
            request.live_leaders.add(broker_id=b, host_name=info.host, port=info.port)
    return request


def update_metadata_request(
    ctx: ControllerContext, controller_id: int, tps: Iterable[TopicPartition]
) -> control_pb2.UpdateMetadataRequest:
    request = control_pb2.UpdateMetadataRequest(
        controller_id=controller_id, controller_epoch=ctx.epoch
    )
    online = ctx.online()
    for b, info in sorted(ctx.live_brokers.items()):
        broker = request.live_brokers.add(id=b)
        for e in info.endpoints or (Endpoint("PLAINTEXT", info.host, info.port),):
            broker.endpoints.add(host=e.host, port=e.port, listener=e.listener, security_protocol=0)
        if info.rack is not None:
            broker.rack = info.rack
    for tp in sorted(tps):
        state = ctx.states.get(tp)
        if state is None:
            continue
        replicas = ctx.assignments[tp]
        # A topic being deleted: leader -2 (LeaderAndIsr.duringDelete), brokers forget it.
        deleting = ctx.deletions.is_queued(tp.topic)
        request.topic_states.add(topic_name=tp.topic).partition_states.add(
            partition_index=tp.partition,
            controller_epoch=state.controller_epoch,
            leader=LEADER_DURING_DELETE if deleting else state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            zk_version=state.zk_version,
            replicas=replicas,
            offline_replicas=[r for r in replicas if r not in online],
        )
    return request
