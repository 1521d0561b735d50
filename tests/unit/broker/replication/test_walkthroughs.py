"""The seeds' walk-throughs and the KIPs' failure stories, step by step, on real in-memory logs.

Every KIP story runs twice: with Kafka's fix (no acknowledged record lost, no divergence) and
with the behaviour the fix replaced, which must lose or diverge exactly as the KIP describes —
proof that these tests can fail. Reference §4.6–§4.8 tell the stories.
"""

from __future__ import annotations

import pytest

from broker.replication.truncation import TruncationMode
from tests.unit.broker.replication.model import ReplicaSet

EPOCH = TruncationMode.LEADER_EPOCH
HW = TruncationMode.HIGH_WATERMARK


def lost(m: ReplicaSet, on: int) -> list[tuple[int, bytes]]:
    """Records acknowledged with acks=all that broker `on` does not hold at their offsets."""
    held = dict(m.records(on))
    acked = [
        (p.first_offset + i, v)
        for p in m.produces
        if p.acked and p.acks == -1
        for i, v in enumerate(p.values)
    ]
    return [(o, v) for o, v in acked if held.get(o) != v]


def divergence(m: ReplicaSet, a: int, b: int) -> list[int]:
    """Offsets that both brokers hold with different records."""
    ra, rb = dict(m.records(a)), dict(m.records(b))
    return sorted(o for o in ra.keys() & rb.keys() if ra[o] != rb[o])


# ---- seed "Kafka副本机制…": one leader, one follower, one record -----------------------------


def test_seed_follower_fetch_after_produce_moves_hw_in_two_fetches() -> None:
    m = ReplicaSet((1, 2))
    m.elect(1, (1, 2))
    assert (m.leo(1), m.hw(1), m.leo(2), m.hw(2)) == (0, 0, 0, 0)
    m.produce(b"r")
    assert (m.leo(1), m.hw(1)) == (1, 0)
    m.fetch(2)  # fetch 1: the follower gets the record; the leader learns its LEO is 0
    assert (m.remote_leo(2), m.hw(1), m.leo(2), m.hw(2)) == (0, 0, 1, 0)
    m.fetch(2)  # fetch 2: remote LEO 1 moves the leader HW; the follower learns it
    assert (m.remote_leo(2), m.hw(1), m.leo(2), m.hw(2)) == (1, 1, 1, 1)
    assert m.produces[0].acked


def test_seed_parked_fetch_woken_by_produce_gives_the_same_states() -> None:
    m = ReplicaSet((1, 2))
    m.elect(1, (1, 2))
    parked = m.start_fetch(2)  # nothing to read: the fetch waits in purgatory
    assert parked is not None
    m.produce(b"r")  # the append completes the parked fetch with the new record
    assert (m.remote_leo(2), m.hw(1), m.leo(2), m.hw(2)) == (0, 0, 1, 0)
    m.fetch(2)
    assert (m.remote_leo(2), m.hw(1), m.leo(2), m.hw(2)) == (1, 1, 1, 1)


# ---- seed "深入剖析…": three brokers --------------------------------------------------------


def three_brokers_at_hw_5_leo_6() -> ReplicaSet:
    m = ReplicaSet((1, 2, 3))
    m.elect(1, (1, 2, 3))
    m.produce(*[b"m%d" % i for i in range(5)])
    for f in (2, 3, 2, 3, 2):
        m.fetch(f)
    m.produce(b"m5")
    assert (m.hw(1), m.leo(1)) == (5, 6)
    assert (m.leo(2), m.hw(2), m.leo(3), m.hw(3)) == (5, 5, 5, 5)
    return m


def test_seed_three_brokers_move_from_hw_5_to_hw_6_step_by_step() -> None:
    m = three_brokers_at_hw_5_leo_6()
    m.fetch(2)
    assert (m.remote_leo(2), m.hw(1), m.leo(2), m.hw(2)) == (5, 5, 6, 5)
    m.fetch(3)
    assert (m.remote_leo(3), m.hw(1), m.leo(3), m.hw(3)) == (5, 5, 6, 5)
    m.fetch(2)  # broker 2 at 6, broker 3 still at 5: the HW waits for the slowest ISR member
    assert (m.remote_leo(2), m.hw(1), m.hw(2)) == (6, 5, 5)
    m.fetch(3)  # both at 6: HW 6; the parked fetch completes with the fresh HW
    assert (m.remote_leo(3), m.hw(1), m.hw(3)) == (6, 6, 6)
    m.fetch(2)
    assert m.hw(2) == 6
    assert all(p.acked for p in m.produces)


def test_seed_a_stalled_broker_leaves_the_isr_and_the_hw_follows_the_others() -> None:
    m = three_brokers_at_hw_5_leo_6()
    # Broker 3 stalls; broker 2 keeps fetching while the producer writes on.
    for step in range(8):
        m.produce(b"x%d" % step)
        m.fetch(2)
        m.fetch(2)
        m.tick(m.lag_ms // 4)
        m.isr_expiration()
    assert m.leader.partition.isr == {1, 2}
    assert m.zk.isr == (1, 2) and m.zk.leader_epoch == 0  # leader-driven: same epoch
    # The HW is now computed from brokers 1 and 2 only.
    assert m.hw(1) == m.leo(1) == m.leo(2)
    assert m.hw(1) > m.remote_leo(3)
    # Broker 3 catches up and re-enters once its LEO reaches the HW.
    while m.leo(3) < m.leo(1):
        m.fetch(3)
    m.fetch(3)
    assert m.leader.partition.isr == {1, 2, 3}
    assert list(m.zk.isr) == [1, 2, 3]


# ---- KIP-101 scenario 1: HW truncation, then a fast leader election -------------------------


def kip101_scenario_1(mode: TruncationMode) -> ReplicaSet:
    a, b = 1, 2
    m = ReplicaSet((a, b), mode=mode)
    m.elect(b, (b, a))
    m.produce(b"m1")
    m.fetch(a)
    m.start_fetch(a)  # parked at offset 1; the leader's HW is now 1
    m.produce(b"m2")  # wakes the parked fetch: A gets m2 with HW 1
    m.start_fetch(a)  # A reports LEO 2: the leader's HW becomes 2 and m2 is acknowledged
    assert all(p.acked for p in m.produces)
    assert (m.hw(b), m.hw(a), m.leo(a)) == (2, 1, 2)
    # A restarts before the response with HW 2 arrives.
    m.flush(a)
    m.checkpoint_hw(a)
    m.crash(a)
    m.restart(a)
    m.deliver_leader_and_isr(a)
    m.truncate(a)  # the truncation phase runs before A fetches again...
    m.crash(b)  # ...and B dies before A re-fetched m2
    m.elect(a, (a,))
    return m


def test_kip101_scenario_1_epoch_truncation_keeps_the_acknowledged_record() -> None:
    m = kip101_scenario_1(EPOCH)
    assert m.records(1) == [(0, b"m1"), (1, b"m2")]
    assert lost(m, on=1) == []


def test_kip101_scenario_1_truncating_to_the_hw_loses_an_acknowledged_record() -> None:
    m = kip101_scenario_1(HW)
    assert m.records(1) == [(0, b"m1")]
    assert lost(m, on=1) == [(1, b"m2")]


# ---- KIP-101 scenario 2: divergence after both brokers lose power ----------------------------


def kip101_scenario_2(mode: TruncationMode) -> ReplicaSet:
    a, b = 1, 2
    m = ReplicaSet((a, b), mode=mode)
    m.elect(a, (a, b))
    m.produce(b"m1")
    m.fetch(b)
    m.flush(b)  # B's m1 reaches the disk; its m2 never will
    m.produce(b"m2")
    m.fetch(b)
    m.fetch(b)
    assert (m.hw(a), m.hw(b)) == (2, 2)
    m.flush(a)
    m.checkpoint_hw()
    m.crash(a)
    m.crash(b)  # power loss: B comes back without m2
    m.restart(b)
    assert m.records(b) == [(0, b"m1")]
    m.elect(b, (b,))  # B first, and leader in a new epoch
    m.produce(b"m3")  # offset 1 on B
    m.restart(a)
    m.deliver_leader_and_isr(a)
    m.fetch(a)
    m.fetch(a)
    return m


def test_kip101_scenario_2_epoch_truncation_keeps_the_logs_identical() -> None:
    m = kip101_scenario_2(EPOCH)
    assert m.records(1) == m.records(2) == [(0, b"m1"), (1, b"m3")]


def test_kip101_scenario_2_truncating_to_the_hw_diverges() -> None:
    m = kip101_scenario_2(HW)
    assert m.records(1)[:2] == [(0, b"m1"), (1, b"m2")]
    assert m.records(2) == [(0, b"m1"), (1, b"m3")]
    assert divergence(m, 1, 2) == [1]


# ---- KIP-279: fast leader fail-over ---------------------------------------------------------


def produce_each(m: ReplicaSet, prefix: bytes, offsets: range) -> None:
    # One record per batch, so that any truncation offset is a batch boundary: the divergence
    # shows as different records, not as a follower append refused mid-batch.
    for i in offsets:
        m.produce(prefix + b"%d" % i, acks=1)


def kip279(
    b_writes: int, *, kip279_answers: bool = True, mode: TruncationMode = EPOCH
) -> ReplicaSet:
    a, b = 1, 2
    m = ReplicaSet((a, b), mode=mode, kip279=kip279_answers)
    m.elect(a, (a, b))
    produce_each(m, b"a", range(11))  # offsets 0..10
    m.fetch(b)  # B has 0..10
    produce_each(m, b"a", range(11, 21))  # A: LEO 21; B does not fetch
    m.elect(b, (a, b))  # leadership moves to B; A stays in the ISR but does not fetch yet
    produce_each(m, b"b", range(b_writes))  # B's epoch starts at 11
    m.elect(a, (a, b))  # and back to A, whose new epoch starts at its LEO 21
    for _ in range(4):
        m.fetch(b)
    return m


@pytest.mark.parametrize("b_writes", [5, 10, 15])  # B's LEO below, at and above A's 21
def test_kip279_follower_truncates_to_the_divergence_point_and_converges(b_writes: int) -> None:
    m = kip279(b_writes)
    assert divergence(m, 1, 2) == []
    assert m.records(1) == m.records(2)
    assert [v for _, v in m.records(2)] == [b"a%d" % i for i in range(21)]


@pytest.mark.parametrize("b_writes", [5, 15])
def test_kip279_offset_only_answers_leave_the_logs_divergent(b_writes: int) -> None:
    m = kip279(b_writes, kip279_answers=False)
    bad = divergence(m, 1, 2)
    assert bad and bad[0] == 11  # B keeps its own epoch's records where A has others


def test_kip279_story_does_not_diverge_when_truncating_to_the_hw() -> None:
    # Truncating to the (low) HW throws away B's uncommitted records, so this story only
    # breaks with the pre-KIP-279 epoch answers above.
    m = kip279(15, mode=HW)
    assert divergence(m, 1, 2) == []


def test_kip279_a_follower_missing_the_answered_epoch_asks_again_and_converges() -> None:
    a, b, c = 1, 2, 3
    m = ReplicaSet((a, b, c))
    m.elect(a, (a, b, c))  # epoch 0
    produce_each(m, b"a", range(3))
    m.fetch(b)
    m.fetch(c)
    m.elect(c, (a, b, c), to={c, a})  # epoch 1: B misses it
    produce_each(m, b"c", range(3, 5))
    m.fetch(a)  # A learns epoch 1 from C's records
    m.elect(b, (a, b, c), to={b})  # epoch 2: B leads alone, without ever seeing epoch 1
    produce_each(m, b"b", range(3, 6))
    m.elect(a, (a, b, c), to={a})  # epoch 3: A leads again
    produce_each(m, b"a", range(5, 6))
    m.deliver_leader_and_isr(b)
    for _ in range(3):
        m.fetch(b)
    # B asked for its epoch 2; A answered with epoch 1, unknown to B: B cut to the end of its
    # epoch 0 and asked again for epoch 0 (KIP-279's multi-round case).
    assert [e for f, e in m.epochs_asked if f == b] == [2, 0]
    assert m.records(b) == m.records(a)
    assert [v for _, v in m.records(b)] == [b"a0", b"a1", b"a2", b"c3", b"c4", b"a5"]


# ---- KAFKA-7164: a follower must truncate on every epoch change ------------------------------


def kafka7164(*, pre_fix: bool, mode: TruncationMode = EPOCH) -> ReplicaSet:
    r1, r2, r3 = 1, 2, 3
    m = ReplicaSet((r1, r2, r3), pre_kafka_7164=pre_fix, mode=mode)
    m.elect(r1, (r1, r2, r3))
    m.produce(b"id0", acks=1)  # epoch 0, offset 0
    m.fetch(r3)  # r3 replicates it, r2 does not
    m.elect(r2, (r1, r2, r3), to={r1, r2})  # r3 misses this LeaderAndIsr
    m.truncate(r1)  # r1, now a follower of r2, truncates to empty
    assert m.records(r1) == []
    m.crash(r2)
    m.elect(r1, (r1, r3), to={r1})
    m.produce(b"id1", acks=1)  # epoch 2, offset 0
    m.deliver_leader_and_isr(r3)  # leader r1 again — as r3 last knew it — but epoch 2
    m.fetch(r3)
    m.fetch(r3)
    return m


def test_kafka7164_truncating_on_every_epoch_change_converges() -> None:
    m = kafka7164(pre_fix=False)
    assert m.records(1) == m.records(3) == [(0, b"id1")]


def test_kafka7164_skipping_truncation_when_the_leader_is_unchanged_diverges() -> None:
    m = kafka7164(pre_fix=True)
    assert m.records(3)[0] == (0, b"id0")
    assert divergence(m, 1, 3) == [0]


def test_kafka7164_story_does_not_diverge_when_truncating_to_the_hw() -> None:
    # id0 was never committed (HW 0 everywhere), so truncating to the HW on the epoch change
    # drops it too; the story needs the skipped truncation to break.
    m = kafka7164(pre_fix=False, mode=HW)
    assert divergence(m, 1, 3) == []
