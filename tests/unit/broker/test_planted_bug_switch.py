"""A real broker takes the test-only planted bug from its settings: it says so loudly at start,
its partitions get it, and its fetchers truncate the way it asks (minibroker.core.planted_bugs).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import cast

import pytest

from broker.fetch.fetcher import FollowerFetcher
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.replication.truncation import TruncationMode
from minibroker.core.planted_bugs import PlantedBug
from minibroker.core.types import TopicPartition
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkStore


def replica_manager(tmp_path: Path, bug: str) -> ReplicaManager:
    settings = Settings.load(overrides=[f"minibroker.test.planted.bug={bug}"], environ={})
    return ReplicaManager(settings, 1, tmp_path, cast(ZkStore, None), BrokerMetrics())


@pytest.mark.parametrize("bug", [b for b in PlantedBug if b.enabled], ids=lambda b: b.value)
def test_the_broker_warns_and_hands_the_bug_to_its_partitions(
    tmp_path: Path, bug: PlantedBug, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="minibroker.events"):
        rm = replica_manager(tmp_path, bug.value)
    warned = [r for r in caplog.records if r.getMessage() == "planted_bug_enabled"]
    assert warned and warned[0].levelno == logging.WARNING
    hosted = asyncio.run(rm.opener.get_or_create(TopicPartition("t", 0)))
    assert hosted.partition.planted_bug is bug


def test_without_the_setting_kafkas_rules_and_no_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="minibroker.events"):
        rm = replica_manager(tmp_path, "")
    assert not [r for r in caplog.records if r.getMessage() == "planted_bug_enabled"]
    hosted = asyncio.run(rm.opener.get_or_create(TopicPartition("t", 0)))
    assert hosted.partition.planted_bug is PlantedBug.NONE


@pytest.mark.parametrize(
    ("bug", "mode"),
    [("", TruncationMode.LEADER_EPOCH), ("truncate-to-hw", TruncationMode.HIGH_WATERMARK)],
)
def test_the_fetcher_truncates_as_the_setting_says(
    tmp_path: Path, bug: str, mode: TruncationMode
) -> None:
    async def fetcher_mode() -> TruncationMode:
        rm = replica_manager(tmp_path, bug)
        fetcher = FollowerFetcher(rm.partitions, rm.fetchers.services, 2, "127.0.0.1:1")
        try:
            return fetcher.mode
        finally:
            await fetcher.stop()

    assert asyncio.run(fetcher_mode()) is mode
