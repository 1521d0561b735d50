"""Hand-made histories for the invariant tests: a healthy run of one partition on brokers
1, 2, 3 that each test then breaks in one place."""

from __future__ import annotations

from minibroker.scenarios.history import (
    FinalState,
    History,
    HwSample,
    PartitionStateChange,
    Produced,
    ReplicaBatch,
    ReplicaLog,
)

TOPIC = "t"
REPLICAS = (1, 2, 3)


def state(
    version: int, leader: int, epoch: int, isr: tuple[int, ...], ts: int = 0, partition: int = 0
) -> PartitionStateChange:
    return PartitionStateChange(ts or 1000 + version, partition, version, leader, epoch, isr, 1)


def sample(
    broker: int,
    hw: int,
    *,
    epoch: int = 0,
    leader: int = 1,
    isr: tuple[int, ...] = REPLICAS,
    life: int = 10,
    ts: int = 0,
    partition: int = 0,
) -> HwSample:
    is_leader = broker == leader
    return HwSample(
        ts or 2000 + hw, broker, life, partition, is_leader, leader, epoch, hw, hw,
        isr if is_leader else (),
    )  # fmt: skip


def batches(*ranges: tuple[int, int, int]) -> list[ReplicaBatch]:
    """(base, last, epoch) per batch; the CRC is made from them, so equal batches match."""
    return [ReplicaBatch(b, last, e, (b * 31 + last * 7 + e) & 0xFFFFFFFF) for b, last, e in ranges]


def healthy(records: int = 4) -> History:
    """One partition, leader 1 at epoch 0 with a full ISR, `records` acked records at offsets
    0.. (one batch each), every replica identical, HW = log end."""
    values = {i: f"v{i}" for i in range(records)}
    log_batches = batches(*((i, i, 0) for i in range(records)))
    h = History(TOPIC, {0: REPLICAS})
    h.produced = [Produced(i, 0, f"v{i}", 100 + i, "acked", i, 200 + i) for i in range(records)]
    h.states = [state(0, 1, 0, REPLICAS)]
    h.hw_samples = [sample(1, hw) for hw in range(records + 1)]
    h.logs = [
        ReplicaLog(b, 0, list(log_batches), dict(values), [(0, 0)], records) for b in REPLICAS
    ]
    h.final = FinalState({0: 1}, {0: REPLICAS}, {0: records}, {0: dict(values)})
    return h
