"""Replication throttling's rate (KIP-73), pure: Kafka's ReplicationQuotaManager measures the
bytes of throttled partitions with a SimpleRate over `replication.quota.window.num` samples of
`replication.quota.window.size.seconds` each (11 x 1 s), and a quota is exceeded while that rate
is above the throttled rate (`kafka/server/ReplicationQuotaManager.scala`;
`common/metrics/stats/SimpleRate.java`, `SampledStat.java`). Time is an argument."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _Sample:
    start_ms: int
    value: float = 0.0


@dataclass
class SimpleRate:
    """Bytes per second over the retained samples: their sum over the time since the oldest
    sample started, at least one window (so a first burst does not read as infinite)."""

    samples: int = 11
    window_ms: int = 1000
    _samples: list[_Sample] = field(default_factory=list)
    _current: int = 0

    def record(self, value: float, now_ms: int) -> None:
        """SampledStat.record: into the current sample, or a new one once it is complete."""
        if not self._samples:
            self._samples.append(_Sample(now_ms))
        sample = self._samples[self._current]
        if now_ms - sample.start_ms >= self.window_ms:
            self._current = (self._current + 1) % self.samples
            if self._current >= len(self._samples):
                self._samples.append(_Sample(now_ms))
            else:
                self._samples[self._current] = _Sample(now_ms)
            sample = self._samples[self._current]
        sample.value += value

    def rate(self, now_ms: int) -> float:
        """Bytes per second now (SimpleRate.measure after purgeObsoleteSamples)."""
        if not self._samples:
            return 0.0
        expire_ms = self.samples * self.window_ms
        for i, s in enumerate(self._samples):
            if now_ms - s.start_ms >= expire_ms:
                self._samples[i] = _Sample(now_ms)
        total = sum(s.value for s in self._samples)
        oldest = min(s.start_ms for s in self._samples)
        elapsed_ms = max(now_ms - oldest, self.window_ms)
        return total * 1000.0 / elapsed_ms


def quota_exceeded(rate: SimpleRate, bound_bytes_per_s: int, now_ms: int) -> bool:
    """Sensor.checkQuotas with an upper bound: exceeded while the rate is above the bound."""
    return rate.rate(now_ms) > bound_bytes_per_s


def should_leader_throttle(in_isr: bool, throttled: bool, exceeded: bool) -> bool:
    """ReplicaManager.shouldLeaderThrottle: only a replica outside the ISR, of a throttled
    partition, while the leader's quota is used, gets no records (HW and log start still)."""
    return not in_isr and throttled and exceeded


def should_follower_throttle(in_sync: bool, throttled: bool, exceeded: bool) -> bool:
    """ReplicaFetcherThread.shouldFollowerThrottle: a follower not caught up to the leader's
    HW leaves a throttled partition out of its fetch while its quota is used."""
    return not in_sync and throttled and exceeded
