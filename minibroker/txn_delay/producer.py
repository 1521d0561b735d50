"""A transactional producer of our own, for the scenarios whose timing an unmodified client will
not give: each step is one Kafka request sent when the scenario says (InitProducerId,
AddPartitionsToTxn, Produce, EndTxn, as Kafka 2.6's protocol has them), and a produce can be
*held*: encoded with the transaction's epoch and the partition's next sequence number at the
moment a real client would send it, and delivered later, as a link that delays it would.

Every step is recorded into a HistoryRecorder as the checker's ops (minibroker.history): a send
at its invoke and again at its end (ok with its offset, fail, or info when the client gave up
waiting, as a client whose request timed out), and each transaction's end.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

from kafka.protocol.producer.produce import ProduceRequest
from kafka.protocol.producer.transaction import (
    AddPartitionsToTxnRequest,
    EndTxnRequest,
    InitProducerIdRequest,
)

from minibroker.core.errors import ErrorCode
from minibroker.core.records import TRANSACTIONAL_FLAG, build_batch
from minibroker.history.model import ABORTED, COMMITTED, FAIL, INFO, OK, Send, Txn
from minibroker.history.recorder import HistoryRecorder
from minibroker.txn_delay.wire import (
    RETRIABLE,
    Brokers,
    Connection,
    Retriable,
    WireError,
    check,
    retrying,
)

PRODUCE_VERSION = 3  # the first with a transactional id (KIP-98), magic-2 batches
TXN_VERSION = 1
EPOCH_BUMP_VERSION = 5  # EndTxn v5: KIP-890 part 2 (Kafka 4.0)
PRODUCE_TIMEOUT_MS = 10_000


@dataclass(frozen=True)
class Held:
    """A produce encoded and not yet delivered: its record, its sequence number and epoch."""

    send: Send
    leader: int
    sequence: int
    epoch: int
    encoded: tuple[bytes, Any, int]
    connection: Connection  # its own, to the leader it was prepared for


class OwnTransactionalProducer:
    def __init__(
        self, bootstrap: str, transactional_id: str, recorder: HistoryRecorder,
        transaction_timeout_ms: int = 60_000, epoch_bump: bool = False,
    ) -> None:  # fmt: skip
        self.tid = transactional_id
        self.brokers = Brokers(bootstrap)
        self.recorder = recorder
        self.name = recorder.client_name("own-txn-producer")
        self.timeout_ms = transaction_timeout_ms
        # KIP-890 part 2: EndTxn v5, whose answer is the epoch of the next transaction (a
        # broker with transaction.version 2 bumps it; its sequence numbers start at 0 again).
        self.epoch_bump = epoch_bump
        self.producer_id, self.epoch = -1, -1
        self._sequences: dict[tuple[str, int], int] = {}
        self._numbers = itertools.count(1)
        self._sends = itertools.count(1)  # a send's id: sequences start again at a new epoch
        self._txn = ""
        self._txn_started_ms = 0
        self.ended_ms = 0  # when the last EndTxn was sent
        self._held_connections: list[Connection] = []

    @property
    def transaction(self) -> str:
        return self._txn

    def _call_coordinator(self, request: Any, version: int = TXN_VERSION) -> Any:
        """`request` to the transactional id's coordinator, found anew each time; a lost
        connection (its broker died) is Retriable, with a new connection next time."""
        coordinator = retrying(lambda: self.brokers.coordinator_of(self.tid))
        address = self.brokers.addresses[coordinator]
        try:
            return self.brokers.connection(address).call(request, version)
        except (OSError, WireError) as exc:
            self.brokers.forget(address)
            raise Retriable(f"the coordinator at {address}: {exc}") from None

    def _ask_coordinator(self, request: Any, what: str) -> Any:
        """`request` to the transactional id's coordinator, found and asked again while the
        answer is one a client retries (wire.RETRIABLE)."""

        def once() -> Any:
            answer = self._call_coordinator(request)
            check(getattr(answer, "error_code", 0), what)
            return answer

        return retrying(once)

    def init(self) -> None:
        request = InitProducerIdRequest(
            transactional_id=self.tid, transaction_timeout_ms=self.timeout_ms
        )
        answer = self._ask_coordinator(request, f"InitProducerId({self.tid})")
        self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)

    def begin(self) -> str:
        self._txn = f"{self.name}#{next(self._numbers)}"
        self._txn_started_ms = self.recorder.now_ms()
        return self._txn

    def add_partitions(self, topic: str, partitions: list[int]) -> None:
        t = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic(name=topic, partitions=partitions)
        request = AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=self.tid, v3_and_below_producer_id=self.producer_id,
            v3_and_below_producer_epoch=self.epoch, v3_and_below_topics=[t],
        )  # fmt: skip

        def once() -> None:
            answer = self._call_coordinator(request)
            for result in answer.results_by_topic_v3_and_below:
                for p in result.results_by_partition:
                    check(
                        p.partition_error_code, f"AddPartitionsToTxn({topic}-{p.partition_index})"
                    )

        retrying(once)

    def prepare(self, topic: str, partition: int, value: bytes) -> Held:
        """The produce of `value`, encoded now with this transaction's epoch and the
        partition's next sequence number, and recorded as invoked."""
        sequence = self._sequences.get((topic, partition), 0)
        self._sequences[(topic, partition)] = sequence + 1
        now = self.recorder.now_ms()
        send = Send(
            f"{self.name}-{next(self._sends)}", self.name, topic, None, value, now,
            partition=partition, txn=self._txn,
        )  # fmt: skip
        self.recorder.record(send)
        batch = build_batch(
            [(None, value, (), None)], base_timestamp=now, producer_id=self.producer_id,
            producer_epoch=self.epoch, base_sequence=sequence, attributes=TRANSACTIONAL_FLAG,
        )  # fmt: skip
        data = ProduceRequest.TopicProduceData
        request = ProduceRequest(
            transactional_id=self.tid, acks=-1, timeout_ms=PRODUCE_TIMEOUT_MS,
            topic_data=[data(name=topic, partition_data=[
                data.PartitionProduceData(index=partition, records=batch)])],
        )  # fmt: skip

        def leader_connection() -> tuple[int, Connection]:
            leader = self.brokers.leader_of(topic, partition)
            try:
                return leader, self.brokers.fresh(leader)
            except OSError as exc:
                raise Retriable(f"the leader of {topic}-{partition}: {exc}") from None

        leader, connection = retrying(leader_connection)
        self._held_connections.append(connection)
        encoded = connection.encode(request, PRODUCE_VERSION)
        return Held(send, leader, sequence, self.epoch, encoded, connection)

    def give_up(self, held: Held, why: str = "the client's request timed out") -> None:
        """The client stops waiting for `held`'s answer: indefinite, it may yet land (and its
        late answer, if `deliver` gets one, is recorded after this)."""
        self._end_send(held.send, INFO, error=why)

    def deliver(self, held: Held) -> str:
        """Sends `held` now, on its own connection to the leader it was prepared for; records
        its answer (after a `give_up`, a late one: what the client then saw on the connection)
        and returns its error name ("NONE" when appended)."""
        try:
            answer = held.connection.send_encoded(held.encoded)
        finally:
            held.connection.close()
            self._held_connections.remove(held.connection)
        p = answer.responses[0].partition_responses[0]
        error = _error_name(p.error_code)
        if p.error_code == 0:
            self._end_send(held.send, OK, offset=int(p.base_offset))
        else:
            self._end_send(held.send, FAIL, error=error)
        return error

    def produce(self, topic: str, partition: int, value: bytes) -> str:
        return self.deliver(self.prepare(topic, partition, value))

    def end(self, commit: bool) -> None:
        """EndTxn: commit or abort the transaction, recorded as its end."""
        request = EndTxnRequest(
            transactional_id=self.tid, producer_id=self.producer_id, producer_epoch=self.epoch,
            committed=commit,
        )  # fmt: skip
        self.ended_ms = self.recorder.now_ms()
        answer = retrying(lambda: self._end_once(request))
        error = _error_name(answer.error_code)
        outcome = (COMMITTED if commit else ABORTED) if answer.error_code == 0 else INFO
        self.recorder.record(
            Txn(self.name, self._txn, self._txn_started_ms, self.recorder.now_ms(), outcome,
                "" if answer.error_code == 0 else error)
        )  # fmt: skip
        if answer.error_code:
            raise WireError(f"EndTxn({self.tid}, commit={commit}): {error}")
        if self.epoch_bump and int(answer.producer_epoch) != self.epoch:
            self.producer_id, self.epoch = int(answer.producer_id), int(answer.producer_epoch)
            self._sequences.clear()

    def _end_once(self, request: Any) -> Any:
        answer = self._call_coordinator(
            request, EPOCH_BUMP_VERSION if self.epoch_bump else TXN_VERSION
        )
        if answer.error_code and ErrorCode(answer.error_code) in RETRIABLE:
            check(answer.error_code, "EndTxn")  # raises Retriable: asked again
        return answer

    def _end_send(self, send: Send, outcome: str, offset: int = -1, error: str = "") -> None:
        self.recorder.record(
            replace(send, outcome=outcome, offset=offset, error=error,
                    complete_ms=self.recorder.now_ms())
        )  # fmt: skip

    def close(self) -> None:
        for c in self._held_connections:
            c.close()
        self._held_connections.clear()
        self.brokers.close()


def _error_name(code: int) -> str:
    return ErrorCode(code).name if code else "NONE"
