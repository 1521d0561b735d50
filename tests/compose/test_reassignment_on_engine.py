"""deploy/README.md's step 9 on the compose cluster (issue 26): a partition moved from brokers
1 and 2 to 3 and 2 under a replication throttle with `minibroker topics reassign`, its
walkthrough blocks run as written. Mid-way the topic znode holds Kafka's version 2 JSON with
the adding and removing replicas and the new replica is outside the ISR; once the throttle is
lifted the move completes, the throttles are gone, broker 1's replica is deleted and every
record the producer had acknowledged is still there."""

from __future__ import annotations

import json
from typing import Any

import pytest

from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from minibroker.topology import CONTAINER_LOG_DIR
from tests.compose import engine

pytestmark = [pytest.mark.compose, pytest.mark.integration]


def assignment(zk: ZkStore) -> dict[str, Any]:
    data, _ = zk.get("/brokers/topics/moving")
    parsed: dict[str, Any] = json.loads(data or b"{}")
    return parsed


def test_a_throttled_move_in_the_compose_cluster(
    client: Any, up_seconds: float, block_env: dict[str, str]
) -> None:
    zk = ZkStore(engine.ZK, session_timeout_ms=10_000)
    zk.start()
    try:
        engine.run_block("reassign", block_env)
        mid = assignment(zk)
        assert mid["partitions"] == {"0": [3, 2, 1]}, mid
        assert (mid["adding_replicas"], mid["removing_replicas"]) == ({"0": [3]}, {"0": [1]})
        state, _ = zk.get("/brokers/topics/moving/partitions/0/state")
        assert 3 not in json.loads(state or b"{}")["isr"]  # a replica outside the ISR
        engine.run_block("reassign-done", block_env)
        done = assignment(zk)
        assert done["partitions"] == {"0": [3, 2]}
        assert not done.get("adding_replicas") and not done.get("removing_replicas")
        config, _ = zk.get("/config/topics/moving")
        assert "leader.replication.throttled.replicas" not in json.loads(config or b"{}")["config"]
        wait_until(
            lambda: (
                not engine.container_of(client, "broker-1")
                .exec_run(["sh", "-c", f"ls -d {CONTAINER_LOG_DIR}/moving-0 2>/dev/null"])
                .output.strip()
            ),
            timeout_s=30,
            what="broker 1's replica of moving-0 deleted",
        )
    finally:
        zk.stop()
    described = json.loads(
        engine.mb("topics", "describe", "moving", "--json", "--zk", engine.ZK).stdout
    )  # fmt: skip
    (p,) = described
    assert p["replicas"] == [3, 2] and set(p["isr"]) == {2, 3}
    hw = max(r["high_watermark"] or 0 for r in p["replicas_state"])
    assert hw == 30000  # every record `produce --acks all` had acknowledged
    events = engine.mb("events", "--zk", engine.ZK, "--json").stdout
    for name in ("reassignment_started", "replica_added", "reassignment_completed"):
        assert name in events, f"no {name} event"
