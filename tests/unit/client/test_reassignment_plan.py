"""kafka-reassign-partitions' files and throttle lists (minibroker.client.reassignment_plan), as
Kafka 2.6's ReassignPartitionsCommand computes them (ReassignPartitionsUnitTest:
testCalculateLeaderThrottles / testCalculateFollowerThrottles / testCalculateReassigningBrokers,
testParseExecuteAssignmentArgs)."""

from __future__ import annotations

import json

import pytest

from minibroker.client.reassignment_plan import (
    parse_reassignment_json,
    parse_topics_to_move,
    reassigning_brokers,
    reassignment_json,
    throttled_replicas,
)
from minibroker.core.errors import ApiError
from minibroker.core.types import TopicPartition

FOO0, FOO1, BAR0 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 0)
CURRENT = {FOO0: (0, 1, 2), FOO1: (1, 2, 3), BAR0: (2, 3, 4)}
TARGET = {FOO0: (1, 2, 3), FOO1: (1, 2, 3), BAR0: (3, 4, 5)}


def test_leader_and_follower_throttles_name_current_and_new_replicas() -> None:
    assert throttled_replicas(CURRENT, TARGET) == {
        "bar": ("0:2,0:3,0:4", "0:5"),
        "foo": ("0:0,0:1,0:2", "0:3"),  # foo-1 does not move
    }
    assert reassigning_brokers(CURRENT, TARGET) == {0, 1, 2, 3, 4, 5}


def test_the_file_round_trips_in_kafkas_format() -> None:
    text = reassignment_json(TARGET)
    assert json.loads(text)["partitions"][0] == {
        "topic": "bar", "partition": 0, "replicas": [3, 4, 5], "log_dirs": ["any"] * 3,
    }  # fmt: skip
    assert parse_reassignment_json(text) == TARGET
    assert parse_topics_to_move('{"version":1,"topics":[{"topic":"foo"}]}') == ["foo"]


@pytest.mark.parametrize(
    "text",
    [
        "not json",
        '{"version":1}',
        '{"version":1,"partitions":[]}',
        '{"version":1,"partitions":[{"topic":"a","partition":0,"replicas":[1]},'
        '{"topic":"a","partition":0,"replicas":[2]}]}',
    ],
)
def test_bad_files_are_refused(text: str) -> None:
    with pytest.raises(ApiError):
        parse_reassignment_json(text)
