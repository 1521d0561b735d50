"""Which partitions of an offset commit are refused before the group coordinator, as Kafka 2.6's
KafkaApis.handleOffsetCommitRequest (core/src/main/scala/kafka/server/KafkaApis.scala) does: a
topic the principal may not READ, then a partition missing from the metadata cache
(KafkaApisTest.testOffsetCommitWithInvalidPartition: UNKNOWN_TOPIC_OR_PARTITION)."""

from __future__ import annotations

import pytest

from broker.kafka.authz import commit_refusals
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition

KNOWN = {TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("secret", 0)}
READABLE = {"orders", "no-such-topic"}


@pytest.mark.parametrize(
    ("tp", "refusal"),
    [
        (TopicPartition("orders", 0), None),
        (TopicPartition("orders", 1), None),
        # A topic that does not exist; a partition past a topic's last, or negative (the two
        # partitions of testOffsetCommitWithInvalidPartition).
        (TopicPartition("no-such-topic", 0), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicPartition("orders", 2), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        (TopicPartition("orders", -1), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION),
        # Authorization is checked first: a denied topic does not say whether it exists.
        (TopicPartition("secret", 0), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
        (TopicPartition("hidden", 0), ErrorCode.TOPIC_AUTHORIZATION_FAILED),
    ],
)
def test_a_partition_is_refused_for_authorization_then_existence(
    tp: TopicPartition, refusal: ErrorCode | None
) -> None:
    assert commit_refusals([tp], READABLE, KNOWN).get(tp) == refusal


def test_only_the_refused_partitions_of_a_mixed_commit_are_named() -> None:
    tps = [TopicPartition("orders", 0), TopicPartition("no-such-topic", 3)]
    assert commit_refusals(tps, READABLE, KNOWN) == {
        TopicPartition("no-such-topic", 3): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    }
