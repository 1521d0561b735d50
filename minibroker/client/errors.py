"""What the client raises: a Kafka error code from a broker, or no broker to ask at all."""

from __future__ import annotations

from minibroker.core.errors import ErrorCode


class ClientError(RuntimeError):
    """Base of every error the producer and consumer raise or fail a future with."""


class NoBrokerAvailable(ClientError):
    """None of the known brokers answered (all down, unreachable, or no address given)."""


class BrokerError(ClientError):
    """A broker answered with a Kafka error code that the client does not retry (any more)."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(f"{code.name}: {message}" if message else code.name)
        self.code = code
        self.message = message


class ProduceError(BrokerError):
    """A record was not acknowledged: a fatal code, or delivery_timeout_ms ran out."""


class UnknownTopicError(BrokerError):
    """The topic (or the partition) is not in the cluster's metadata."""

    def __init__(self, topic: str, message: str = "") -> None:
        super().__init__(
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, message or f"unknown topic {topic!r}"
        )
        self.topic = topic


class OffsetOutOfRange(BrokerError):
    """A fetch position is outside the log and auto_offset_reset is "none"."""


class ClientClosed(ClientError):
    """The producer or consumer was used after close()."""
