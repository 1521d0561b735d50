"""Kafka's transaction protocol under a delayed produce (issue 41 §2), on real clusters: with
Kafka 2.6's behaviour each named scenario's anomaly is found by the history checker in what an
unmodified read_committed consumer read; with transaction.partition.verification.enable
(KIP-890 part 1) the leaders refuse the delayed produces and the checker finds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.testing import Cluster
from minibroker.txn_delay.scenarios import SCENARIOS, run

pytestmark = pytest.mark.integration

SETTINGS = {"group.initial.rebalance.delay.ms": 0}


@pytest.fixture(scope="module")
def kafka_26() -> Iterator[Cluster]:
    with Cluster(settings=SETTINGS) as c:
        yield c


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_kafka_26_lets_the_delayed_produce_through(
    kafka_26: Cluster, name: str, tmp_path: Path
) -> None:
    report = run(SCENARIOS[name], kafka_26, tmp_path)
    print(report.text())
    assert report.reproduced, report.text()
    assert set(report.found) == set(SCENARIOS[name].expect), report.text()
