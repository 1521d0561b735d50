"""One Kafka client connection: frames in, answers out in request order (Kafka mutes a
connection until its answer is sent); Produce requests overlap their replication waits
(answers.py), every other request waits for the answers before it.

A connection closes, with a `kafka_connection_closed` event saying why, on framing it cannot
follow, a request that does not parse, an API or version this broker does not serve (Kafka
closes then too; only ApiVersions is answered with UNSUPPORTED_VERSION, so that clients learn
what to ask), or `connections.max.idle.ms` without a byte. Nothing a client sends is
allocated before it has arrived. On a SASL listener every frame goes to the SASL gate until
the client has authenticated (`broker/security/sasl_gate.py`); then the connection's session
carries the principal."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from kafka.protocol.api_key import ApiKey

from broker.kafka import (
    handlers_acls,
    handlers_admin,
    handlers_configs,
    handlers_controller,
    handlers_data,
    handlers_delete_records,
    handlers_group_admin,
    handlers_groups,
    handlers_log_dirs,
    handlers_meta,
    handlers_txn,
)
from broker.kafka.answers import OrderedAnswers
from broker.kafka.context import KafkaContext
from broker.kafka.errors import CloseConnection
from broker.kafka.framing import FrameError, FrameReader
from broker.kafka.handlers_sasl import handle_sasl_authenticate, handle_sasl_handshake
from broker.kafka.protocol import (
    APIS,
    MalformedRequest,
    decode_request,
    encode_response,
    peek_header,
)
from broker.security.authorizer import Session
from broker.security.sasl_gate import SaslClose, SaslGate
from minibroker.core.errors import ErrorCode
from minibroker.core.security.sasl import MAX_RECEIVE_SIZE
from minibroker.runtime import logging as slog

Handler = Callable[[KafkaContext, Any, int], Awaitable[Any]]

HANDLERS: dict[int, Handler] = {
    ApiKey.ApiVersions: handlers_meta.handle_api_versions,
    ApiKey.Metadata: handlers_meta.handle_metadata,
    ApiKey.Produce: handlers_data.handle_produce,
    ApiKey.Fetch: handlers_data.handle_fetch_request,
    ApiKey.ListOffsets: handlers_data.handle_list_offsets,
    ApiKey.OffsetForLeaderEpoch: handlers_data.handle_offset_for_leader_epoch,
    ApiKey.InitProducerId: handlers_txn.handle_init_producer_id,
    ApiKey.AddPartitionsToTxn: handlers_txn.handle_add_partitions_to_txn,
    ApiKey.AddOffsetsToTxn: handlers_txn.handle_add_offsets_to_txn,
    ApiKey.EndTxn: handlers_txn.handle_end_txn,
    ApiKey.TxnOffsetCommit: handlers_txn.handle_txn_offset_commit,
    ApiKey.FindCoordinator: handlers_groups.handle_find_coordinator,
    ApiKey.JoinGroup: handlers_groups.handle_join_group,
    ApiKey.SyncGroup: handlers_groups.handle_sync_group,
    ApiKey.Heartbeat: handlers_groups.handle_heartbeat,
    ApiKey.LeaveGroup: handlers_groups.handle_leave_group,
    ApiKey.OffsetCommit: handlers_groups.handle_offset_commit,
    ApiKey.OffsetFetch: handlers_groups.handle_offset_fetch,
    ApiKey.CreateTopics: handlers_admin.handle_create_topics,
    ApiKey.DeleteTopics: handlers_admin.handle_delete_topics,
    ApiKey.ListGroups: handlers_group_admin.handle_list_groups,
    ApiKey.DescribeGroups: handlers_group_admin.handle_describe_groups,
    ApiKey.DeleteGroups: handlers_group_admin.handle_delete_groups,
    ApiKey.DescribeLogDirs: handlers_log_dirs.handle_describe_log_dirs,
    ApiKey.DeleteRecords: handlers_delete_records.handle_delete_records,
    ApiKey.CreatePartitions: handlers_admin.handle_create_partitions,
    ApiKey.ElectLeaders: handlers_controller.handle_elect_leaders,
    ApiKey.AlterPartitionReassignments: handlers_controller.handle_alter_partition_reassignments,
    ApiKey.ListPartitionReassignments: handlers_controller.handle_list_partition_reassignments,
    ApiKey.DescribeConfigs: handlers_configs.handle_describe_configs,
    ApiKey.AlterConfigs: handlers_configs.handle_alter_configs,
    ApiKey.IncrementalAlterConfigs: handlers_configs.handle_incremental_alter_configs,
    ApiKey.SaslHandshake: handle_sasl_handshake,
    ApiKey.SaslAuthenticate: handle_sasl_authenticate,
    ApiKey.CreateAcls: handlers_acls.handle_create_acls,
    ApiKey.DescribeAcls: handlers_acls.handle_describe_acls,
    ApiKey.DeleteAcls: handlers_acls.handle_delete_acls,
}
READ_CHUNK = 1 << 16


def _is_produce(payload: bytes) -> bool:
    """Whether the frame is a Produce (a frame too short to tell is answered in turn, which
    closes the connection as before)."""
    try:
        return bool(peek_header(payload).api_key == ApiKey.Produce)
    except MalformedRequest:
        return False


class KafkaConnection:
    def __init__(
        self,
        ctx: KafkaContext,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        max_request_bytes: int,
        idle_timeout_s: float,
        gate: SaslGate | None = None,
    ) -> None:
        self.ctx = ctx
        self.reader = reader
        self.writer = writer
        self.gate = gate
        self.max_request_bytes = max_request_bytes
        limit = min(max_request_bytes, MAX_RECEIVE_SIZE) if gate else max_request_bytes
        self.frames = FrameReader(limit)
        self.idle_timeout_s = idle_timeout_s
        peer = writer.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)

    async def serve(self) -> None:
        reason = "the client closed the connection"
        answers = OrderedAnswers(self._write, self.writer.close)
        try:
            while True:
                try:
                    async with asyncio.timeout(self.idle_timeout_s):
                        data = await self.reader.read(READ_CHUNK)
                except TimeoutError:
                    reason = f"idle for connections.max.idle.ms ({self.idle_timeout_s:g} s)"
                    break
                if answers.failure is not None:
                    raise answers.failure
                if not data:
                    break
                try:
                    payloads = self.frames.feed(data)
                except FrameError:
                    await answers.all_written()  # the requests before it are answered first
                    raise
                for payload in payloads:
                    if self.gate is not None and not self.gate.complete:
                        await answers.all_written()
                        answer = await self.authenticate(payload)
                    elif _is_produce(payload):
                        await answers.room()  # Produce overlaps earlier ones (answers.py)
                        answers.start(self.answer(payload))
                        continue
                    else:
                        await answers.all_written()
                        answer = await self.answer(payload)
                    if answer is not None:
                        await self._write(answer)
            await answers.all_written()
        except SaslClose as exc:
            reason = f"SASL: {exc}"
            if exc.answer is not None:
                with contextlib.suppress(ConnectionError):
                    self.writer.write(exc.answer)
                    await self.writer.drain()
        except (FrameError, MalformedRequest, CloseConnection) as exc:
            reason = str(exc)
        except (ConnectionError, asyncio.IncompleteReadError) as exc:
            reason = f"connection lost: {exc!r}"
        finally:
            await answers.close()
            slog.event(
                "kafka_connection_closed", logging.DEBUG, listener=self.ctx.listener,
                peer=self.peer, reason=reason,
            )  # fmt: skip
            self.writer.close()

    async def _write(self, answer: bytes) -> None:
        self.writer.write(answer)
        await self.writer.drain()

    async def authenticate(self, payload: bytes) -> bytes | None:
        """A frame before authentication, through the SASL gate."""
        assert self.gate is not None
        got = await self.gate.answer(payload)
        if got.principal is not None:
            self.ctx = dataclasses.replace(
                self.ctx, session=Session(got.principal, self.ctx.session.host)
            )
            self.frames.max_frame_bytes = self.max_request_bytes
        return got.answer

    async def answer(self, payload: bytes) -> bytes | None:
        """The framed answer to one request (None when Kafka sends none: acks=0)."""
        start = peek_header(payload)
        api = APIS.get(start.api_key)
        if api is None:
            raise CloseConnection(f"API key {start.api_key} is not served by this broker")
        if not api.supports(start.api_version):
            if api.key == ApiKey.ApiVersions:
                refusal = handlers_meta.api_versions(ErrorCode.UNSUPPORTED_VERSION)
                return encode_response(api, 0, start.correlation_id, refusal)
            raise CloseConnection(
                f"{api.key.name} v{start.api_version} is not served (v{api.min_version}"
                f"-v{api.max_version} are)"
            )
        request = decode_request(api, start.api_version, payload)
        name = f"Kafka{api.key.name}"
        metrics = self.ctx.rm.metrics
        started = time.perf_counter()
        metrics.requests.labels(name).inc()
        try:
            response = await HANDLERS[api.key](self.ctx, request, start.api_version)
        except Exception as exc:  # the broker never crashes on a request
            slog.event(
                "request_failed", logging.ERROR, request=name, error=repr(exc), exc_info=True
            )
            raise CloseConnection(f"{name} failed on the broker: {exc!r}") from None
        finally:
            metrics.request_time.labels(name).observe((time.perf_counter() - started) * 1000)
        if response is None:
            return None
        try:
            return encode_response(api, start.api_version, start.correlation_id, response)
        except Exception as exc:  # an answer this version cannot carry: a defect, not a crash
            slog.event(
                "request_failed", logging.ERROR, request=name, error=repr(exc), exc_info=True,
                stage="encoding the answer",
            )  # fmt: skip
            raise CloseConnection(f"{name}'s answer could not be encoded: {exc!r}") from None
