"""Kafka's checkpoint file format: golden bytes from the reference, round trips, bad files."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.checkpoints import (
    REPLICATION_OFFSET_CHECKPOINT,
    CheckpointError,
    format_epochs,
    format_offsets,
    parse_epochs,
    parse_offsets,
    read_offsets_checkpoint,
    write_offsets_checkpoint,
)
from broker.replication.leader_epoch import EpochEntry
from minibroker.core.types import TopicPartition

OFFSETS_GOLDEN = b"0\n2\norders 0 1042\norders 1 977\n"  # reference §3.5
EPOCHS_GOLDEN = b"0\n3\n0 0\n1 1\n2 2\n"  # reference §4.3


def test_the_offset_checkpoint_matches_kafkas_bytes() -> None:
    entries = {TopicPartition("orders", 1): 977, TopicPartition("orders", 0): 1042}
    assert format_offsets(entries) == OFFSETS_GOLDEN
    assert parse_offsets(OFFSETS_GOLDEN) == entries


def test_the_epoch_checkpoint_matches_kafkas_bytes() -> None:
    entries = [EpochEntry(0, 0), EpochEntry(1, 1), EpochEntry(2, 2)]
    assert format_epochs(entries) == EPOCHS_GOLDEN
    assert parse_epochs(EPOCHS_GOLDEN) == entries


def test_an_empty_checkpoint_has_a_version_and_a_zero_count() -> None:
    assert format_offsets({}) == b"0\n0\n"
    assert parse_offsets(b"0\n0\n") == {}
    assert parse_epochs(b"") == []


def test_readers_split_on_any_whitespace() -> None:
    assert parse_offsets(b"0\n1\norders\t3   7\r\n") == {TopicPartition("orders", 3): 7}


@given(
    st.dictionaries(
        st.builds(
            TopicPartition,
            st.text("abcXYZ019._-", min_size=1, max_size=20),
            st.integers(0, 1000),
        ),
        st.integers(0, 2**63 - 1),
        max_size=10,
    )
)
def test_offsets_round_trip(entries: dict[TopicPartition, int]) -> None:
    assert parse_offsets(format_offsets(entries)) == entries


@given(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**63 - 1)), max_size=10))
def test_epochs_round_trip(pairs: list[tuple[int, int]]) -> None:
    entries = [EpochEntry(e, o) for e, o in pairs]
    assert parse_epochs(format_epochs(entries)) == entries


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"1\n0\n", "version 1"),
        (b"0\n3\n0 0\n1 1\n", "says 3 entries but holds 2"),
        (b"0\n1\n0 0\n1 1\n", "says 1 entries but holds 2"),
        (b"0\n1\n0 0 0\n", "malformed"),
        (b"0\n1\nzero 0\n", "not an integer"),
        (b"0\n", "no count line"),
        (b"\xff\n", "not UTF-8"),
    ],
)
def test_bad_epoch_checkpoints_are_rejected(data: bytes, message: str) -> None:
    with pytest.raises(CheckpointError, match=message):
        parse_epochs(data)


def test_a_topic_with_whitespace_cannot_be_written() -> None:
    with pytest.raises(CheckpointError, match="cannot be written"):
        format_offsets({TopicPartition("two words", 0): 1})


def test_the_atomic_write_leaves_no_tmp_file(tmp_path: Path) -> None:
    path = tmp_path / REPLICATION_OFFSET_CHECKPOINT
    assert read_offsets_checkpoint(path) == {}
    write_offsets_checkpoint(path, {TopicPartition("orders", 0): 1042})
    write_offsets_checkpoint(
        path, {TopicPartition("orders", 0): 1042, TopicPartition("orders", 1): 977}
    )
    assert path.read_bytes() == OFFSETS_GOLDEN
    assert [p.name for p in tmp_path.iterdir()] == [REPLICATION_OFFSET_CHECKPOINT]
    assert read_offsets_checkpoint(path)[TopicPartition("orders", 1)] == 977
