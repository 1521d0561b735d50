"""Corrupted storage on real processes (issue 15 part 3): a follower is stopped, one of its
files is damaged — the active segment's tail torn and garbled, the index garbled, the HW
checkpoint garbled, the leader-epoch checkpoint garbled, the log-start-offset and cleaner-offset
checkpoints garbled, a producer snapshot garbled (issue 27) — and it is started again while the
others took more writes. It must come up (not crash), say what it repaired, fetch what it lost
from the leader and rejoin the ISR; every acknowledged record reads back identical."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from minibroker import localcluster
from minibroker.core.errors import ErrorCode
from minibroker.core.types import TopicPartition
from minibroker.runtime.waiting import wait_until
from tests.integration.conftest import Cluster, describe_partition
from tests.integration.rpc import batch, produce

pytestmark = pytest.mark.integration

TP = TopicPartition("t", 0)


def _tear_and_garble(d: Path) -> None:
    segment = max(d.glob("*.log"))
    data = bytearray(segment.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 8] = b"\xde\xad\xbe\xef" * 2
    segment.write_bytes(bytes(data[:-5]))


def _garble_index(d: Path) -> None:
    index = max(d.glob("*.index"))
    index.write_bytes(b"\x7f\xff\xff\xff" * 40)


def _garble_hw_checkpoint(d: Path) -> None:
    (d.parent / "replication-offset-checkpoint").write_bytes(b"0\n1\nt 0 not-a-number\n")


def _garble_epoch_checkpoint(d: Path) -> None:
    (d / "leader-epoch-checkpoint").write_bytes(b"\x00garbage\n5 5 5\n")


def _garble_start_checkpoint(d: Path) -> None:
    (d.parent / "log-start-offset-checkpoint").write_bytes(b"0\n2\nt 0 7\n")  # count lies


def _garble_cleaner_checkpoint(d: Path) -> None:
    (d.parent / "cleaner-offset-checkpoint").write_bytes(b"9\n1\nt 0 3\n")  # unknown version


def _garble_producer_snapshot(d: Path) -> None:
    (d / f"{3:020d}.snapshot").write_bytes(b"\x00\x01not a snapshot")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "segment-tail": (_tear_and_garble, "log_recovered"),
    "index": (_garble_index, "log_recovered"),
    "hw-checkpoint": (_garble_hw_checkpoint, "checkpoint_discarded"),
    "leader-epoch-checkpoint": (_garble_epoch_checkpoint, "log_recovered"),
    "log-start-offset-checkpoint": (_garble_start_checkpoint, "checkpoint_discarded"),
    "cleaner-offset-checkpoint": (_garble_cleaner_checkpoint, "checkpoint_discarded"),
    "producer-snapshot": (_garble_producer_snapshot, "log_recovered"),
}


def test_a_follower_recovers_from_each_damaged_file_and_rejoins_the_isr(topic_t: Cluster) -> None:
    c = topic_t
    leader = describe_partition(c)["leader"]
    address = c.state.process(f"broker-{leader}").address
    acked: list[bytes] = []

    def write(n: int) -> None:
        for _ in range(n):
            value = b"acked-%d" % len(acked)
            r = produce(address, TP, batch(value, value + b"-bis"))
            assert r.error is ErrorCode.NONE, r
            acked.extend([value, value + b"-bis"])

    write(30)
    follower = next(b for b in (1, 2, 3) if b != leader)
    name = f"broker-{follower}"
    part_dir = Path(c.state.process(name).data_dir) / "data" / "t-0"
    for case, (damage, event) in CASES.items():
        c.cli("cluster", "stop", name)
        damage(part_dir)
        write(10)  # the others go on: the follower must fetch these after its repair
        seen = len(c.log_events(name))
        c.cli("cluster", "start", name)
        assert localcluster.is_alive(c.reload().process(name)), f"{case}: the broker died"

        def caught_up() -> bool:
            p = describe_partition(c)
            leos = {s["broker"]: s["log_end_offset"] for s in p["replicas_state"]}
            return follower in p["isr"] and leos[follower] == leos[leader]

        wait_until(caught_up, timeout_s=30, what=f"{name} back in the ISR after {case}")
        events = [e["event"] for e in c.log_events(name)[seen:]]
        assert event in events, f"{case}: no {event} among {events}"

    consumed = c.cli("consume", "t", "--from-beginning", "--until-hw", "--timeout-ms", "20000")
    assert consumed.stdout.split() == [v.decode() for v in acked]
