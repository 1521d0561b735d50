"""The leader's ISR write is resent while ZooKeeper cannot answer (a write lost with its
connection may have been applied), and only while the proposal is still the one in flight."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any, cast

import pytest

from broker import isr_tasks
from broker.metrics import BrokerMetrics
from broker.replica_manager import ReplicaManager
from broker.replication.partition import ProposeIsr
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.runtime.settings import Settings
from minibroker.runtime.zk_store import ZkConnectionError, ZkStore

TP = TopicPartition("t", 0)
PROPOSAL = ProposeIsr(
    tp=TP,
    new_state=LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2, 3), controller_epoch=1),
    expected_zk_version=3,
    kind="expand",
    changed=frozenset({3}),
)


class FlakyStore:
    """Fails the first `failures` batches of ISR writes with a connection loss, then succeeds;
    records each batch's partitions."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0
        self.batches: list[list[TopicPartition]] = []

    def update_partition_states(self, writes: list[tuple[TopicPartition, Any, int]]) -> list[int]:
        self.calls += 1
        self.batches.append([tp for tp, _state, _expected in writes])
        if self.calls <= self.failures:
            raise ZkConnectionError("connection loss")
        return [expected + 1 for _tp, _state, expected in writes]


async def _write(tmp_path: Path, store: FlakyStore, in_flight: bool) -> int | None:
    rm = ReplicaManager(
        Settings.load(environ={}), 1, tmp_path, cast(ZkStore, store), BrokerMetrics()
    )
    hosted = await rm.opener.get_or_create(TP)
    hosted.partition.isr_change_in_flight = PROPOSAL if in_flight else None
    return (await rm.isr._conditional_writes([PROPOSAL]))[0]


def test_a_connection_loss_is_retried_until_the_write_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isr_tasks, "ISR_WRITE_RETRY_S", 0.0)
    store = FlakyStore(failures=2)
    assert asyncio.run(_write(tmp_path, store, in_flight=True)) == 4
    assert store.calls == 3


def test_no_retry_once_the_proposal_is_no_longer_in_flight(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(isr_tasks, "ISR_WRITE_RETRY_S", 0.0)
    store = FlakyStore(failures=1)
    assert asyncio.run(_write(tmp_path, store, in_flight=False)) is None
    assert store.calls == 1


def test_proposals_made_while_a_batch_is_written_go_out_together(tmp_path: Path) -> None:
    store = FlakyStore(failures=0)

    async def run() -> None:
        rm = ReplicaManager(
            Settings.load(environ={}), 1, tmp_path, cast(ZkStore, store), BrokerMetrics()
        )
        proposals = []
        for p in range(3):
            tp = TopicPartition("t", p)
            hosted = await rm.opener.get_or_create(tp)
            proposal = ProposeIsr(
                tp=tp,
                new_state=PROPOSAL.new_state,
                expected_zk_version=3,
                kind="expand",
                changed=frozenset({3}),
            )
            hosted.partition.isr_change_in_flight = proposal
            proposals.append(proposal)
        for proposal in proposals:  # one loop turn: all three queue before the first write
            rm.isr.write_isr_soon(proposal)
        await asyncio.wait(set(rm.isr._tasks))  # the writer (the periodic tasks never started)
        assert all(rm.partitions[p.tp].partition.zk_version == 4 for p in proposals)

    asyncio.run(run())
    assert store.batches == [[TopicPartition("t", p) for p in range(3)]]


def test_a_failed_write_reports_the_isr_the_proposal_changed_not_the_followers_empty_one(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # A fenced leader's shrink fails after it became a follower (its ISR is empty by then):
    # the event still says which ISR it tried to shrink.
    shrink = ProposeIsr(
        tp=TP,
        new_state=LeaderAndIsr(leader=1, leader_epoch=0, isr=(1, 2), controller_epoch=1),
        expected_zk_version=3,
        kind="shrink",
        changed=frozenset({3}),
    )

    async def run() -> None:
        rm = ReplicaManager(
            Settings.load(environ={}), 1, tmp_path, cast(ZkStore, FlakyStore(0)), BrokerMetrics()
        )
        hosted = await rm.opener.get_or_create(TP)
        hosted.partition.assignment = (1, 2, 3)
        assert not hosted.partition.isr
        rm.isr._write_isr(shrink, None)

    with caplog.at_level(logging.WARNING, logger="minibroker.events"):
        asyncio.run(run())
    (record,) = [r for r in caplog.records if r.getMessage() == "isr_shrink_failed"]
    fields = record.__dict__["fields"]
    assert (fields["old_isr"], fields["isr"]) == ([1, 2, 3], [1, 2])
