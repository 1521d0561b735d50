"""Kafka's directory layout: <log dir>/<topic>-<partition>/<20-digit base offset>.log."""

from __future__ import annotations

from pathlib import Path

from broker.log.layout import open_log, parse_partition_dir, partition_dir
from minibroker.core.records import NewRecord, build_batch
from minibroker.core.types import TopicPartition


def test_a_partition_lives_in_topic_dash_partition(tmp_path: Path) -> None:
    tp = TopicPartition("orders-eu", 3)
    assert partition_dir(tmp_path, tp) == tmp_path / "orders-eu-3"
    assert parse_partition_dir("orders-eu-3") == tp
    assert parse_partition_dir("replication-offset-checkpoint") is None
    assert parse_partition_dir("meta.properties") is None


def test_open_log_writes_kafka_segment_files_and_reopens(tmp_path: Path) -> None:
    tp = TopicPartition("t", 0)
    log = open_log(tmp_path, tp)
    log.append_as_leader(build_batch([NewRecord(b"k", b"v")], base_timestamp=1), leader_epoch=0)
    log.flush()
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert "00000000000000000000.log" in names
    assert "leader-epoch-checkpoint" in names
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n1\n0 0\n"
    reopened = open_log(tmp_path, tp)
    assert reopened.log_end_offset == 1
