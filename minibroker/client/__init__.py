"""Client-side access to a cluster: the async Producer and Consumer, and admin look-ups."""

from minibroker.client.consumer import Consumer
from minibroker.client.errors import (
    BrokerError,
    ClientClosed,
    ClientError,
    NoBrokerAvailable,
    OffsetOutOfRange,
    ProduceError,
    UnknownTopicError,
)
from minibroker.client.fetch_state import ConsumerRecord
from minibroker.client.producer import Producer
from minibroker.client.record_future import RecordFuture
from minibroker.client.record_metadata import RecordMetadata
from minibroker.core.types import TopicPartition

__all__ = [
    "BrokerError",
    "ClientClosed",
    "ClientError",
    "Consumer",
    "ConsumerRecord",
    "NoBrokerAvailable",
    "OffsetOutOfRange",
    "ProduceError",
    "Producer",
    "RecordFuture",
    "RecordMetadata",
    "TopicPartition",
    "UnknownTopicError",
]
