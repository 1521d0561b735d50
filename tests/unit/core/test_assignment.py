"""Replica assignment (Kafka's AdminUtils.assignReplicasToBrokers without racks), topic-name
validation (Topic.validate) and topic config checks: tables from Kafka's own tests, plus
properties over any broker list."""

from __future__ import annotations

import re
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from minibroker.core.assignment import (
    MAX_TOPIC_NAME_LENGTH,
    assign_replicas_to_brokers,
    colliding_topics,
    validate_topic_name,
)
from minibroker.core.errors import ApiError, ErrorCode
from minibroker.core.topic_config import (
    min_insync_replicas,
    parse_config_pairs,
    validate_topic_config,
)

# ---- assignment ----------------------------------------------------------------------------------

# Kafka's AdminTest.testReplicaAssignment (brokers 0-4, 10 partitions, RF 3, fixed start 0),
# the same table as AdminUtils' javadoc.
KAFKA_TABLE = {
    0: (0, 1, 2),
    1: (1, 2, 3),
    2: (2, 3, 4),
    3: (3, 4, 0),
    4: (4, 0, 1),
    5: (0, 2, 3),
    6: (1, 3, 4),
    7: (2, 4, 0),
    8: (3, 0, 1),
    9: (4, 1, 2),
}


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "start", "shift", "expected"),
    [
        ([0, 1, 2, 3, 4], 10, 3, 0, 0, KAFKA_TABLE),
        # The reference's example: 3 brokers, 3 partitions, RF 3, leaders 1, 2, 3.
        ([1, 2, 3], 3, 3, 0, 0, {0: (1, 2, 3), 1: (2, 3, 1), 2: (3, 1, 2)}),
        # Start index moves the first leader; the shift moves the followers.
        ([1, 2, 3], 3, 3, 1, 0, {0: (2, 3, 1), 1: (3, 1, 2), 2: (1, 2, 3)}),
        ([1, 2, 3], 3, 3, 0, 1, {0: (1, 3, 2), 1: (2, 1, 3), 2: (3, 2, 1)}),
        # The shift grows every n partitions: partition 3 is not a copy of partition 0.
        ([1, 2, 3], 4, 2, 0, 0, {0: (1, 2), 1: (2, 3), 2: (3, 1), 3: (1, 3)}),
        ([7], 2, 1, 0, 0, {0: (7,), 1: (7,)}),
        # Non-contiguous ids: indexes into the list, not ids.
        ([10, 20, 30], 2, 1, 2, 0, {0: (30,), 1: (10,)}),
    ],
)
def test_assignment_table(
    brokers: list[int],
    partitions: int,
    rf: int,
    start: int,
    shift: int,
    expected: dict[int, tuple[int, ...]],
) -> None:
    got = assign_replicas_to_brokers(
        brokers, partitions, rf, start_index=start, replica_shift=shift
    )
    assert got == expected


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "code"),
    [
        ([1, 2, 3], 3, 4, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([1, 2, 3], 3, 0, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([1, 2, 3], 3, -1, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([], 1, 1, ErrorCode.INVALID_REPLICATION_FACTOR),
        ([1, 2, 3], 0, 1, ErrorCode.INVALID_PARTITIONS),
        ([1, 2, 3], -2, 1, ErrorCode.INVALID_PARTITIONS),
    ],
)
def test_assignment_errors(brokers: list[int], partitions: int, rf: int, code: ErrorCode) -> None:
    with pytest.raises(ApiError) as err:
        assign_replicas_to_brokers(brokers, partitions, rf, start_index=0, replica_shift=0)
    assert err.value.code is code
    assert str(err.value).startswith(code.name + ": ")


def test_the_error_message_is_kafkas() -> None:
    with pytest.raises(ApiError, match="Replication factor: 4 larger than available brokers: 3"):
        assign_replicas_to_brokers([1, 2, 3], 1, 4, start_index=0, replica_shift=0)


@st.composite
def assignments(draw: st.DrawFn) -> tuple[list[int], int, int, dict[int, tuple[int, ...]]]:
    brokers = draw(st.lists(st.integers(0, 1000), min_size=1, max_size=8, unique=True))
    partitions = draw(st.integers(1, 40))
    rf = draw(st.integers(1, len(brokers)))
    start = draw(st.integers(0, len(brokers) - 1))
    shift = draw(st.integers(0, len(brokers) - 1))
    got = assign_replicas_to_brokers(
        brokers, partitions, rf, start_index=start, replica_shift=shift
    )
    return brokers, partitions, rf, got


@given(assignments())
def test_every_partition_gets_rf_distinct_live_brokers(
    case: tuple[list[int], int, int, dict[int, tuple[int, ...]]],
) -> None:
    brokers, partitions, rf, got = case
    assert sorted(got) == list(range(partitions))
    for replicas in got.values():
        assert len(replicas) == rf
        assert len(set(replicas)) == rf, f"duplicate replica in {replicas}"
        assert set(replicas) <= set(brokers)


@given(assignments())
def test_leaders_are_spread_round_robin(
    case: tuple[list[int], int, int, dict[int, tuple[int, ...]]],
) -> None:
    brokers, partitions, _, got = case
    leaders = Counter(replicas[0] for replicas in got.values())
    n = len(brokers)
    # Each broker leads partitions // n or partitions // n + 1 partitions.
    assert all(leaders[b] in (partitions // n, -(-partitions // n)) for b in brokers)


@given(assignments())
def test_full_rounds_give_every_broker_the_same_number_of_replicas(
    case: tuple[list[int], int, int, dict[int, tuple[int, ...]]],
) -> None:
    brokers, partitions, rf, got = case
    n = len(brokers)
    rounds = partitions // n
    full = {p: r for p, r in got.items() if p < rounds * n}
    load = Counter(b for replicas in full.values() for b in replicas)
    assert all(load[b] == rounds * rf for b in brokers)


# ---- topic names -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["t", "events", "a.b_c-D9", "_", "...", "x" * MAX_TOPIC_NAME_LENGTH],
)
def test_legal_topic_names(name: str) -> None:
    validate_topic_name(name)


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("", "empty"),
        (".", '"." or ".."'),
        ("..", '"." or ".."'),
        ("x" * (MAX_TOPIC_NAME_LENGTH + 1), "longer than 249"),
        ("has space", "character other than"),
        ("slash/no", "character other than"),
        ("ünïcode", "character other than"),
        ("colon:no", "character other than"),
    ],
)
def test_illegal_topic_names(name: str, why: str) -> None:
    with pytest.raises(ApiError, match=why) as err:
        validate_topic_name(name)
    assert err.value.code is ErrorCode.INVALID_TOPIC_EXCEPTION


@pytest.mark.parametrize(
    ("topic", "existing", "expected"),
    [
        ("a.b", ["a_b", "a.b", "c"], ["a_b"]),
        ("a_b", ["a.b", "a-b"], ["a.b"]),
        ("ab", ["a_b", "a.b"], []),
        ("a.b", [], []),
    ],
)
def test_dot_underscore_collisions(topic: str, existing: list[str], expected: list[str]) -> None:
    assert colliding_topics(topic, existing) == expected


# ---- topic configs -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"min.insync.replicas": "2", "unclean.leader.election.enable": "TRUE"},
        {"segment.bytes": "1048576", "retention.ms": "-1", "cleanup.policy": "compact,delete"},
        # Issue 26 §8: every topic config Kafka 2.6 knows is accepted (LogConfig.configDef).
        {"compression.type": "lz4", "message.timestamp.type": "LogAppendTime"},
        {"max.message.bytes": "1", "segment.jitter.ms": "0", "preallocate": "true"},
        {"flush.messages": "1", "flush.ms": "1000", "message.format.version": "2.6-IV0"},
        {"message.format.version": "0.10.2", "min.cleanable.dirty.ratio": "0.1"},
        {"leader.replication.throttled.replicas": "*"},
        {"follower.replication.throttled.replicas": "0:1,1:2"},
        {"leader.replication.throttled.replicas": ""},
        {"retention.bytes": "-5", "delete.retention.ms": "0", "file.delete.delay.ms": "1"},
        {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "10"},
    ],
)
def test_known_topic_configs(config: dict[str, str]) -> None:
    validate_topic_config(config)


@pytest.mark.parametrize(
    ("config", "why"),
    [
        # Messages are Kafka's (ConfigDef and LogConfig.validateNames).
        ({"max.messages.bytes": "1"}, "Unknown topic config name: max.messages.bytes"),
        ({"min.insync.replicas": "0"}, "Value must be at least 1"),
        ({"min.insync.replicas": "two"}, "Not a number of type INT"),
        ({"unclean.leader.election.enable": "yes"}, "Expected value to be either true or false"),
        ({"segment.bytes": "13"}, "Value must be at least 14"),
        ({"segment.bytes": "2147483648"}, "Not a number of type INT"),
        ({"retention.ms": "-2"}, "Value must be at least -1"),
        ({"cleanup.policy": "forever"}, "String must be one of: compact, delete"),
        ({"compression.type": "brotli"}, "String must be one of: uncompressed, zstd"),
        ({"message.timestamp.type": "Now"}, "String must be one of: CreateTime, LogAppendTime"),
        ({"min.cleanable.dirty.ratio": "1.5"}, "Value must be no more than 1"),
        ({"message.format.version": "2.7"}, "Version `2.7` is not a valid version"),
        ({"leader.replication.throttled.replicas": "0-1"}, "literal '*' or a list of replicas"),
        ({"min.compaction.lag.ms": "5", "max.compaction.lag.ms": "4"}, "conflict topic config"),
    ],
)
def test_bad_topic_configs(config: dict[str, str], why: str) -> None:
    with pytest.raises(ApiError, match=re.escape(why)) as err:
        validate_topic_config(config)
    assert err.value.code is ErrorCode.INVALID_CONFIG


def test_config_pairs() -> None:
    assert parse_config_pairs(["a=1", " b = x=y "]) == {"a": "1", "b": "x=y"}
    with pytest.raises(ApiError, match="KEY=VALUE"):
        parse_config_pairs(["novalue"])


def test_min_insync_replicas_falls_back_to_the_brokers_setting() -> None:
    assert min_insync_replicas({"min.insync.replicas": "2"}, broker_default=3) == 2
    assert min_insync_replicas({}, broker_default=3) == 3
    assert min_insync_replicas({}) == 1


def test_added_partitions_are_numbered_on_from_the_existing_ones() -> None:
    # AdminZkClient.addPartitions: start index and shift fixed at partition 0's first broker,
    # partition ids from the existing count; the shift still steps at multiples of n.
    got = assign_replicas_to_brokers(
        [1, 2, 3], 2, 2, start_index=0, replica_shift=0, start_partition=2
    )
    assert got == {2: (3, 1), 3: (1, 3)}
