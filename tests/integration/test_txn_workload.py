"""The transactional workload (issue 41 §1) on a real cluster with unmodified confluent-kafka
clients: transactional producers (every fourth transaction aborted), a consume-transform-produce
relay committing its offsets in its transactions, read_committed readers; the history has
what each client saw, and the checker finds nothing but the write cycles Kafka allows, with a
leader killed mid-run too."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from minibroker.history import check
from minibroker.history.model import ABORTED, COMMITTED
from minibroker.history.txn_workload import TxnWorkload, run
from minibroker.testing import Cluster, leader_of

pytestmark = pytest.mark.integration

SETTINGS = {"group.initial.rebalance.delay.ms": 0, "zookeeper.session.timeout.ms": 6000}
WORKLOAD = TxnWorkload(topic="queue", transactions=16, transaction_timeout_ms=10_000)


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    with Cluster(settings=SETTINGS) as c:
        for topic in (WORKLOAD.topic, WORKLOAD.relay_topic):
            c.create_topic(topic, partitions=3, replication_factor=3, min_insync_replicas=2)
        yield c


def test_the_workload_records_every_client_and_checks_clean(
    cluster: Cluster, tmp_path: Path
) -> None:
    # A leader killed while the transactions run; started again for the next test.
    killed: list[str] = []
    timer = threading.Timer(
        2.0, lambda: killed.append(cluster.kill(leader_of(WORKLOAD.topic, 0)).node)
    )
    timer.start()
    try:
        history = run(WORKLOAD, cluster.confluent_config(), tmp_path / "history")
    finally:
        timer.join()
        for node in killed:
            cluster.start(node)
    assert killed, "the leader was not killed during the run"
    ends = [t.outcome for t in history.transactions.values()]
    assert ends.count(ABORTED) >= WORKLOAD.producers * (WORKLOAD.transactions // 4)
    assert ends.count(COMMITTED) >= WORKLOAD.producers  # and the relay's
    relayed = [r for r in history.reads if r.topic == WORKLOAD.relay_topic]
    assert relayed and all(r.read_committed for r in history.reads)
    assert any(c.txn for c in history.commits), "the relay committed offsets in transactions"
    result = check(history, delivery="exactly-once", timeline=cluster.events())
    print(result.text())
    assert result.ok, result.text()
    # What each reader read of the producers' topic is exactly the committed records.
    committed = {
        s.value for s in history.sends
        if s.topic == WORKLOAD.topic and s.txn
        and history.transactions.get(s.txn) is not None
        and history.transactions[s.txn].outcome == COMMITTED
    }  # fmt: skip
    for reader in {r.client for r in history.reads if "reader" in r.client}:
        read = {r.value for r in history.reads if r.client == reader and r.topic == WORKLOAD.topic}
        assert read == committed, reader
