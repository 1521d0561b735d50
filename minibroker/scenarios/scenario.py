"""A named scenario: what it does to the cluster (a function of a ScenarioContext), the topic it
needs, and what the runner must know about it (fault proxy, victims kept down, expected loss).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from minibroker.scenarios.context import ScenarioContext

# Kafka's replication system test: RF 3, min.insync.replicas 2 (reference §8.1).
DEFAULT_TOPIC_CONFIG: Mapping[str, str] = {"min.insync.replicas": "2"}


@dataclass(frozen=True)
class Scenario:
    """`run(ctx)` injects the faults and waits for their effects, between the runner's
    produce and consume/validate phases.

    `keeps_down`: the victims stay down (shutdown scenarios), so the runner only heals what is
    left. `unclean_loss_expected`: acked records an unclean election discards are reported as
    expected, not as a violation. `needs_proxy`: the cluster is started with the fault proxy.
    `cluster_settings`: `name=value` settings applied after the runner's fast profile."""

    name: str
    description: str
    run: Callable[[ScenarioContext], None]
    needs_proxy: bool = False
    keeps_down: bool = False
    unclean_loss_expected: bool = False
    topic_config: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_TOPIC_CONFIG))
    cluster_settings: tuple[str, ...] = ()
