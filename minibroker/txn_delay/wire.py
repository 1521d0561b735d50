"""Kafka's wire protocol, one request at a time, for a client whose timing the scenarios control:
a connection per broker, requests and responses as kafka-python's protocol classes encode and
decode them (the brokers' KAFKA listener speaks the same), and the two lookups a transactional
producer needs (a partition's leader, a transactional id's coordinator). A request can be
encoded now and sent later (`encode` / `send_encoded`): what a link that holds it does.
"""

from __future__ import annotations

import importlib
import itertools
import socket
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from kafka.protocol.metadata.find_coordinator import FindCoordinatorRequest
from kafka.protocol.metadata.metadata import MetadataRequest

from minibroker.core.errors import ErrorCode

T = TypeVar("T")
TIMEOUT_S = 15.0
TRANSACTION_KEY = 1  # FindCoordinator's key_type for a transactional id
CLIENT_ID = "minibroker-txn-delay"


class WireError(RuntimeError):
    """A broker answered with an error, or could not be asked."""


def _response_class(request: Any) -> Any:
    module = importlib.import_module(type(request).__module__)
    return getattr(module, type(request).__name__.replace("Request", "Response"))


class Connection:
    """One TCP connection to one broker's KAFKA listener, answers read in order."""

    def __init__(self, address: str) -> None:
        host, port = address.rsplit(":", 1)
        self.address = address
        self._socket = socket.create_connection((host, int(port)), timeout=TIMEOUT_S)
        self._ids = itertools.count(1)

    def encode(self, request: Any, version: int) -> tuple[bytes, Any, int]:
        """The request as framed bytes, with what decodes its answer."""
        request.API_VERSION = version
        request.with_header(correlation_id=next(self._ids), client_id=CLIENT_ID)
        return bytes(request.encode(header=True, framed=True)), _response_class(request), version

    def send_encoded(self, encoded: tuple[bytes, Any, int]) -> Any:
        frame, response, version = encoded
        self._socket.sendall(frame)
        return response.decode(self._read_frame(), version=version, header=True, framed=True)

    def call(self, request: Any, version: int) -> Any:
        return self.send_encoded(self.encode(request, version))

    def _read_frame(self) -> bytes:
        def exactly(n: int) -> bytes:
            out = b""
            while len(out) < n:
                chunk = self._socket.recv(n - len(out))
                if not chunk:
                    raise WireError(f"{self.address} closed the connection instead of answering")
                out += chunk
            return out

        (size,) = struct.unpack(">i", exactly(4))
        return struct.pack(">i", size) + exactly(size)

    def close(self) -> None:
        self._socket.close()


class Brokers:
    """Connections to a cluster's brokers, by id, found from a bootstrap list."""

    def __init__(self, bootstrap: str) -> None:
        self._bootstrap = [a.strip() for a in bootstrap.split(",") if a.strip()]
        self._connections: dict[str, Connection] = {}
        self.addresses: dict[int, str] = {}

    def connection(self, address: str) -> Connection:
        if address not in self._connections:
            self._connections[address] = Connection(address)
        return self._connections[address]

    def forget(self, address: str) -> None:
        """Drop the connection to `address` (a new one is made when next asked)."""
        connection = self._connections.pop(address, None)
        if connection is not None:
            connection.close()

    def fresh(self, broker_id: int) -> Connection:
        """A connection of its own to the broker (a request sent on it later, without
        waiting behind the answers of the shared one)."""
        return Connection(self.addresses[broker_id])

    def ask_any(self, request: Any, version: int) -> Any:
        """`request` to the first bootstrap broker that answers (Retriable if none does)."""
        failure: Exception | None = None
        for address in self._bootstrap:
            try:
                return self.connection(address).call(request, version)
            except (OSError, WireError) as exc:
                self.forget(address)
                failure = exc
        raise Retriable(f"no bootstrap broker answered: {failure}")

    def metadata(self, topics: Iterable[str]) -> Any:
        names = [MetadataRequest.MetadataRequestTopic(name=t) for t in topics]
        answer = self.ask_any(MetadataRequest(topics=names), 1)
        self.addresses = {b.node_id: f"{b.host}:{b.port}" for b in answer.brokers}
        return answer

    def leader_of(self, topic: str, partition: int) -> int:
        for t in self.metadata([topic]).topics:
            for p in t.partitions:
                if p.partition_index == partition and p.error_code == 0 and p.leader_id >= 0:
                    return int(p.leader_id)
        raise Retriable(f"{topic}-{partition} has no leader")

    def coordinator_of(self, transactional_id: str) -> int:
        self.metadata([])
        request = FindCoordinatorRequest(key=transactional_id, key_type=TRANSACTION_KEY)
        answer = self.ask_any(request, 1)
        check(answer.error_code, f"FindCoordinator({transactional_id})")
        # A broker just started may coordinate before the answering broker's metadata lists it.
        self.addresses.setdefault(int(answer.node_id), f"{answer.host}:{answer.port}")
        return int(answer.node_id)

    def close(self) -> None:
        for c in self._connections.values():
            c.close()
        self._connections.clear()


# What a client retries (Kafka's RetriableException errors of these requests): the
# coordinator moving or loading, its markers of the last transaction still being written, a
# restarted coordinator's metadata not knowing the topic yet.
RETRIABLE = frozenset(
    {
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)
RETRY_S = 0.1


class Retriable(WireError):
    pass


def check(error_code: int, what: str) -> None:
    if error_code:
        error = ErrorCode(error_code)
        raise (Retriable if error in RETRIABLE else WireError)(f"{what}: {error.name}")


def retrying(call: Callable[[], T], deadline_s: float = TIMEOUT_S) -> T:
    """`call()` again while it raises Retriable, until the deadline (then that error)."""
    deadline = time.monotonic() + deadline_s
    while True:
        try:
            return call()
        except Retriable:
            if time.monotonic() > deadline:
                raise
            time.sleep(RETRY_S)
