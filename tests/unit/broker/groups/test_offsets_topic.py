"""`__consumer_offsets` as Kafka 2.6 creates and appends to it (KafkaApis.createInternalTopic,
GroupCoordinator.offsetsTopicConfigs, GroupMetadataManager.storeOffsets/storeGroup)."""

from __future__ import annotations

import pytest

from broker.groups.offsets_topic import (
    OffsetsTopicSpec,
    commit_error,
    group_store_error,
    metadata_too_large,
)
from minibroker.core.errors import ErrorCode as E


def test_the_topic_is_compacted_and_waits_for_enough_brokers() -> None:
    spec = OffsetsTopicSpec()
    assert spec.configs() == {
        "cleanup.policy": "compact", "segment.bytes": "104857600", "compression.type": "producer",
    }  # fmt: skip
    assert spec.creation_error(2) is E.COORDINATOR_NOT_AVAILABLE  # not capped, as 2.6
    assert spec.creation_error(3) is E.NONE
    assert OffsetsTopicSpec(replication_factor=1).creation_error(1) is E.NONE
    assert spec.partition_of("hello") == 99162322 % 50


@pytest.mark.parametrize(
    ("append", "commit", "group"),
    [
        (E.NONE, E.NONE, E.NONE),
        (E.NOT_ENOUGH_REPLICAS, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
        (E.UNKNOWN_TOPIC_OR_PARTITION, E.COORDINATOR_NOT_AVAILABLE, E.COORDINATOR_NOT_AVAILABLE),
        (E.NOT_LEADER_OR_FOLLOWER, E.NOT_COORDINATOR, E.NOT_COORDINATOR),
        (E.KAFKA_STORAGE_ERROR, E.NOT_COORDINATOR, E.NOT_COORDINATOR),
        (E.REQUEST_TIMED_OUT, E.REQUEST_TIMED_OUT, E.REBALANCE_IN_PROGRESS),
        (E.MESSAGE_TOO_LARGE, E.INVALID_COMMIT_OFFSET_SIZE, E.UNKNOWN_SERVER_ERROR),
        (E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE, E.CORRUPT_MESSAGE),
    ],
)
def test_append_errors_become_kafkas_answers(append: E, commit: E, group: E) -> None:
    assert commit_error(append) is commit
    assert group_store_error(append) is group


def test_metadata_is_counted_in_java_chars() -> None:
    assert not metadata_too_large(None, 4)
    assert not metadata_too_large("abcd", 4)
    assert metadata_too_large("abcde", 4)
    assert metadata_too_large("\U0001f600" * 3, 5)  # each is two UTF-16 units
