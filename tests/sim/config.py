"""One schedule's parameters, all drawn from its seed: cluster shape, timings, network quality,
fault rates and workload. Timings are shortened (lag in seconds, not tens of seconds) so a few
simulated seconds see several ISR shrinks, session expiries and elections."""

from __future__ import annotations

import random
from dataclasses import dataclass

from minibroker.core.planted_bugs import PlantedBug
from minibroker.core.types import TopicPartition

TOPIC = "t"
REPLICATION_FACTOR = 3
MIN_INSYNC_REPLICAS = 2
CONTROLLER_IDS = (101, 102)
PRODUCER_ID = 201
CONSUMER_ID = 301


def state_path(tp: TopicPartition) -> str:
    """The partition's state znode (reference §1.5)."""
    return f"/brokers/topics/{tp.topic}/partitions/{tp.partition}/state"


@dataclass(frozen=True)
class SimConfig:
    seed: int
    bug: PlantedBug
    brokers: tuple[int, ...]
    assignments: tuple[tuple[TopicPartition, tuple[int, ...]], ...]
    lag_ms: int
    session_timeout_ms: int
    fetch_wait_ms: int
    fetch_backoff_ms: int
    rpc_timeout_ms: int
    produce_timeout_ms: int
    checkpoint_ms: int
    flush_ms: int
    segment_bytes: int
    replica_fetch_max_bytes: int
    net_delay_ms: tuple[int, int]
    net_spike_rate: float
    net_spike_ms: int
    net_drop_rate: float
    fault_phase_ms: int
    quiet_ms: int
    fault_interval_ms: int
    power_loss_share: float
    produce_interval_ms: int
    acks_one_share: float
    consume_interval_ms: int

    @property
    def partitions(self) -> list[TopicPartition]:
        return [tp for tp, _ in self.assignments]

    @property
    def end_ms(self) -> int:
        return self.fault_phase_ms + self.quiet_ms


def make_config(
    seed: int, bug: PlantedBug = PlantedBug.NONE, brokers: int | None = None
) -> SimConfig:
    rng = random.Random(f"config-{seed}")
    n = brokers if brokers is not None else rng.choice((3, 3, 4, 5))
    broker_ids = tuple(range(1, n + 1))
    partitions = rng.choice((1, 1, 2, 2, 3))
    assignments = []
    for p in range(partitions):
        replicas = rng.sample(broker_ids, REPLICATION_FACTOR)
        assignments.append((TopicPartition(TOPIC, p), tuple(replicas)))
    lag = rng.choice((1000, 1500, 2000, 3000))
    # Sessions both shorter and longer than the lag: who notices a dead follower first (the
    # leader's shrink or the controller's ISR removal) differs.
    session = rng.choice((lag // 2, lag, 2 * lag, 3 * lag))
    delay_hi = rng.choice((5, 15, 40))
    return SimConfig(
        seed=seed,
        bug=bug,
        brokers=broker_ids,
        assignments=tuple(assignments),
        lag_ms=lag,
        session_timeout_ms=max(session, 800),
        fetch_wait_ms=min(500, lag // 2),
        fetch_backoff_ms=rng.choice((50, 200)),
        rpc_timeout_ms=1000,
        produce_timeout_ms=rng.choice((1000, 2000)),
        checkpoint_ms=rng.choice((250, 1000)),
        flush_ms=rng.choice((200, 1000, 3000, 8000)),
        segment_bytes=rng.choice((1 << 20, 1 << 20, 2048)),
        # Sometimes one batch per fetch: a follower that fetches often but never catches up.
        replica_fetch_max_bytes=rng.choice((1 << 20, 1 << 20, 1)),
        net_delay_ms=(1, delay_hi),
        net_spike_rate=rng.choice((0.0, 0.01, 0.05)),
        net_spike_ms=rng.choice((100, 400, 1500)),
        net_drop_rate=rng.choice((0.0, 0.0, 0.005, 0.02, 0.05)),
        fault_phase_ms=rng.choice((6000, 9000, 12000)),
        quiet_ms=3 * lag + max(session, 800),
        fault_interval_ms=rng.choice((400, 800, 1500)),
        power_loss_share=rng.choice((0.0, 0.3, 0.6)),
        produce_interval_ms=rng.choice((30, 60, 120)),
        acks_one_share=rng.choice((0.0, 0.2, 0.5)),
        consume_interval_ms=rng.choice((100, 300)),
    )
