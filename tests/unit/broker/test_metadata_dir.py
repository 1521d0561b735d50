"""meta.properties keeps one log dir to one broker id and cluster (Kafka's check)."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.metadata_dir import InconsistentBrokerId, prepare_log_dir


def test_first_start_writes_meta_properties(tmp_path: Path) -> None:
    d = tmp_path / "logs"
    prepare_log_dir(d, 1, "abc")
    assert (d / "meta.properties").read_text() == "version=0\nbroker.id=1\ncluster.id=abc\n"
    prepare_log_dir(d, 1, "abc")  # same broker again: fine


def test_other_broker_or_cluster_is_refused(tmp_path: Path) -> None:
    prepare_log_dir(tmp_path, 1, "abc")
    with pytest.raises(InconsistentBrokerId, match="broker.id=1"):
        prepare_log_dir(tmp_path, 2, "abc")
    with pytest.raises(InconsistentBrokerId, match="cluster abc"):
        prepare_log_dir(tmp_path, 1, "other")
