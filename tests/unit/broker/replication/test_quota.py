"""The replication quota's rate (broker.replication.quota), as Kafka's SimpleRate over
SampledStat measures it (ReplicationQuotaManagerTest.shouldExceedQuotaThenReturnBackBelowBoundAs
WindowRolls, shouldThrottleOnlyDefinedReplicas; RateTest)."""

from __future__ import annotations

from broker.replication.quota import (
    SimpleRate,
    quota_exceeded,
    should_follower_throttle,
    should_leader_throttle,
)


def test_the_rate_exceeds_the_quota_then_falls_back_as_the_window_rolls() -> None:
    # Kafka's test: 11 x 1 s windows, quota 100 B/s; 400 B at t=0 reads 400 B/s (one window
    # at least), then falls as time passes until the sample expires.
    rate = SimpleRate(samples=11, window_ms=1000)
    rate.record(400, 0)
    assert quota_exceeded(rate, 100, 0)
    assert rate.rate(0) == 400
    assert quota_exceeded(rate, 100, 2000)  # 400 B over 2 s
    assert rate.rate(4000) == 100
    assert not quota_exceeded(rate, 100, 5000)  # 80 B/s
    assert rate.rate(11_000) == 0  # the sample expired


def test_samples_roll_and_are_reused() -> None:
    rate = SimpleRate(samples=3, window_ms=1000)
    for t in range(0, 10_000, 100):
        rate.record(10, t)  # 100 B/s steadily
    assert 90 <= rate.rate(10_000) <= 110
    assert len(rate._samples) == 3


def test_who_is_throttled() -> None:
    # Only replicas outside the ISR, of throttled partitions, while the quota is used.
    assert should_leader_throttle(in_isr=False, throttled=True, exceeded=True)
    assert not should_leader_throttle(in_isr=True, throttled=True, exceeded=True)
    assert not should_leader_throttle(in_isr=False, throttled=False, exceeded=True)
    assert not should_leader_throttle(in_isr=False, throttled=True, exceeded=False)
    assert should_follower_throttle(in_sync=False, throttled=True, exceeded=True)
    assert not should_follower_throttle(in_sync=True, throttled=True, exceeded=True)
