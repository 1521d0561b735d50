"""The ZooKeeper store's pipelined batches against a real ZooKeeper: each partition's outcome is
the one the single-write call would give (created / exists, new zkVersion / BADVERSION), and a
failed /controller_epoch check anywhere in a batch is ControllerMoved (reference §5.1, §5.5)."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest

from controller.state_changes import StateChanges
from minibroker import localcluster
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.core.zk_layout import ControllerEpochZNode, TopicPartitionStateZNode
from minibroker.runtime import zk_server
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_client import WriteOp
from minibroker.runtime.zk_store import ControllerMoved, ZkStore

pytestmark = pytest.mark.integration


@pytest.fixture
def zk(tmp_path: Path) -> Iterator[ZkStore]:
    port = localcluster.free_ports(1)[0]
    cfg = zk_server.write_config(tmp_path / "zk", port)
    server = subprocess.Popen(
        zk_server.command(zk_server.find_zookeeper(), cfg, tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until(
            lambda: "Mode:" in (zk_server.four_letter("127.0.0.1", port) or ""),
            timeout_s=30,
            what="ZooKeeper",
        )
        store = ZkStore(f"127.0.0.1:{port}", session_timeout_ms=10_000)
        store.start()
        store.create(ControllerEpochZNode.path, ControllerEpochZNode.encode(1))
        try:
            yield store
        finally:
            store.stop()
    finally:
        server.terminate()
        server.wait(10)


def _state(leader: int, epoch: int = 0) -> LeaderAndIsr:
    return LeaderAndIsr(leader=leader, leader_epoch=epoch, isr=(leader, 2), controller_epoch=1)


TPS = [TopicPartition("t", p) for p in range(25)]  # more than one window of requests


def test_creates_reads_and_conditional_sets_in_batches(zk: ZkStore) -> None:
    created = zk.create_partition_states_fenced(0, {tp: _state(1) for tp in TPS})
    assert created == {tp: 0 for tp in TPS}
    again = zk.create_partition_states_fenced(
        0, {TPS[0]: _state(3), TopicPartition("t", 99): _state(3)}
    )
    assert again == {TPS[0]: None, TopicPartition("t", 99): 0}  # the existing one is kept
    states = zk.read_partition_states([*TPS, TopicPartition("u", 0)])
    assert set(states) == set(TPS) and states[TPS[0]].leader == 1
    writes = [(tp, _state(2, 1), 0 if tp.partition % 2 == 0 else 7) for tp in TPS]
    versions = zk.set_partition_states_fenced(0, writes)
    assert versions == {tp: 1 if tp.partition % 2 == 0 else None for tp in TPS}
    after = zk.read_partition_states(TPS)
    assert [after[tp].leader for tp in TPS] == [2 if p % 2 == 0 else 1 for p in range(len(TPS))]
    got = zk.get_many([TopicPartitionStateZNode.path(TPS[0]), "/nowhere"])
    assert got["/nowhere"] is None and got[TopicPartitionStateZNode.path(TPS[0])] is not None


def test_writes_sharing_a_multi_end_as_they_would_alone(zk: ZkStore) -> None:
    """The fenced writes share multis (ZkStore._fenced_many): a failing write must not take its
    batch-mates with it, whatever its place and however many fail (every third here: stale
    versions, a missing znode), across more partitions than one multi holds."""
    many = [TopicPartition("w", p) for p in range(130)]
    assert set(zk.create_partition_states_fenced(0, {tp: _state(1) for tp in many}).values()) == {0}
    missing = TopicPartition("w", 999)
    writes = [(tp, _state(2, 1), 5 if tp.partition % 3 == 0 else 0) for tp in many]
    versions = zk.set_partition_states_fenced(0, [*writes, (missing, _state(2, 1), 0)])
    assert versions == {
        **{tp: None if tp.partition % 3 == 0 else 1 for tp in many},
        missing: None,
    }
    after = zk.read_partition_states(many)
    assert [after[tp].leader for tp in many] == [1 if p % 3 == 0 else 2 for p in range(130)]
    again = zk.create_partition_states_fenced(
        0, {many[7]: _state(3), TopicPartition("w", 500): _state(3)}
    )
    assert again == {many[7]: None, TopicPartition("w", 500): 0}


def test_a_moved_controller_epoch_fails_the_batch(zk: ZkStore) -> None:
    zk.create_partition_states_fenced(0, {tp: _state(1) for tp in TPS[:3]})
    zk.set(ControllerEpochZNode.path, ControllerEpochZNode.encode(2))  # another controller won
    with pytest.raises(ControllerMoved):
        zk.set_partition_states_fenced(0, [(tp, _state(2, 1), 0) for tp in TPS[:3]])
    assert all(s.leader == 1 for s in zk.read_partition_states(TPS[:3]).values())
    with pytest.raises(ControllerMoved):
        zk.create_partition_states_fenced(0, {TopicPartition("t", 50): _state(1)})


def test_deletes_in_a_batch_report_what_was_there(zk: ZkStore) -> None:
    zk.ensure_paths(["/n/a", "/n/b"])
    assert zk.delete_many_fenced(0, ["/n/a", "/n/missing", "/n/b"]) == [True, False, True]
    assert zk.children("/n") == []


def test_pipelined_data_watches_see_every_change_deletion_and_recreation(zk: ZkStore) -> None:
    """Many watched znodes changed at once are each seen with their last data; a deleted one is
    seen gone, and seen again when it comes back."""
    import threading

    paths = [f"/watched/n{i}" for i in range(200)]
    for path in paths:
        zk.create(path, b"0", makepath=True)
    seen: dict[str, bytes | None] = {}
    lock = threading.Lock()

    def watcher(path: str) -> Callable[[bytes | None, object], None]:
        def on_data(data: bytes | None, _stat: object) -> None:
            with lock:
                seen[path] = data

        return on_data

    for path in paths:
        zk.watch_data_pipelined(path, watcher(path))
    wait_until(lambda: all(seen.get(p) == b"0" for p in paths), timeout_s=10, what="first reads")
    for path in paths:
        zk.set(path, b"1")
    wait_until(lambda: all(seen.get(p) == b"1" for p in paths), timeout_s=10, what="the changes")
    zk.delete(paths[0])
    wait_until(lambda: paths[0] in seen and seen[paths[0]] is None, timeout_s=10, what="gone")
    zk.create(paths[0], b"back")
    wait_until(lambda: seen.get(paths[0]) == b"back", timeout_s=10, what="recreated")


class _CountingStore:
    """The real store, counting the state znodes read."""

    def __init__(self, store: ZkStore) -> None:
        self.store = store
        self.read: list[TopicPartition] = []

    def read_partition_states(
        self, tps: list[TopicPartition]
    ) -> dict[TopicPartition, LeaderAndIsr]:
        self.read += tps
        return self.store.read_partition_states(tps)

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)


def test_the_controller_writes_from_its_cached_states_and_reads_only_what_moved(
    zk: ZkStore,
) -> None:
    versions = zk.create_partition_states_fenced(0, {tp: _state(1) for tp in TPS})
    counting = _CountingStore(zk)
    settings = Settings.load(profile="demo", environ={})
    changes = StateChanges(cast(Any, counting), settings, 1, cast(Any, None), cast(Any, None))
    changes.ctx.epoch, changes.ctx.epoch_zk_version = 1, 0
    changes.ctx.states = {
        tp: replace(_state(1), zk_version=v) for tp, v in versions.items() if v is not None
    }
    assert len(changes.ctx.states) == len(TPS)
    # A leader shrank the ISR of TPS[3] behind the controller's back: its cache is stale.
    moved = zk.set_partition_states_fenced(0, [(TPS[3], replace(_state(1), isr=(1,)), 0)])
    assert moved == {TPS[3]: 1}
    decided_from: dict[TopicPartition, list[tuple[int, ...]]] = {}

    def decide(tp: TopicPartition, fresh: LeaderAndIsr) -> LeaderAndIsr:
        decided_from.setdefault(tp, []).append(tuple(fresh.isr))
        return replace(fresh, leader=2, leader_epoch=fresh.leader_epoch + 1)

    changed = asyncio.run(changes._write_states(TPS, decide))
    assert changed == TPS
    assert counting.read == [TPS[3]]  # only the partition whose write met BADVERSION
    assert decided_from[TPS[3]] == [(1, 2), (1,)]  # decided again from what ZooKeeper held
    for tp, state in zk.read_partition_states(TPS).items():
        assert (state.leader, state.leader_epoch) == (2, 1)
        assert state.isr == ((1,) if tp == TPS[3] else (1, 2))


def test_multis_in_a_batch_apply_whole_or_not_at_all(zk: ZkStore) -> None:
    """multi_many (auto-created topics' writes): each multi all or nothing, the failing write's
    error for a failed one, and the multis after it applied."""
    zk.create("/m", b"")
    zk.create("/m/taken", b"old")
    batches = [[WriteOp(f"/m/a{i}", b"%d" % i) for i in range(i * 3, i * 3 + 3)] for i in range(12)]
    batches[4] = [WriteOp("/m/b0", b"x"), WriteOp("/m/taken", b"y"), WriteOp("/m/b1", b"z")]
    batches[5] = [WriteOp("/m/taken", b"set", create=False), WriteOp("/m/c0", b"c")]
    outcomes = zk.multi_many(batches)
    assert [type(o).__name__ for o in outcomes] == ["NoneType"] * 4 + ["ZkNodeExists"] + [
        "NoneType"
    ] * 7
    children = set(zk.children("/m"))
    assert not {"b0", "b1"} & children  # the failed multi left nothing behind
    assert {"c0", "a0", "a35"} <= children
    assert zk.get("/m/taken")[0] == b"set"
