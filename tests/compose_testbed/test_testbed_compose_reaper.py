"""`Cluster(compose=True, secure=True)` from a process that dies without down(): its reaper
takes the compose project down (containers, network, volumes) and removes the host's copy of
the security files. Meanwhile a Kafka client writes over SASL_SSL with the admin's settings
the cluster handed out. (Runs before test_testbed_on_compose.py's cluster is up: the compose
clusters publish the same ports.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from minibroker.runtime.waiting import wait_until
from tests.compose import engine

PROJECT = "mbtestreap"
CHILD = f"""
import json, time
from minibroker.testing import Cluster
c = Cluster(compose=True, project={PROJECT!r}, secure=True,
            compose_file={str(engine.COMPOSE_FILE)!r}).up()
c.create_topic("orders", partitions=1)
print(json.dumps(c.confluent_config()), flush=True)
time.sleep(600)
"""


def test_a_killed_owner_leaves_no_container_network_volume_or_secret(tmp_path: Path) -> None:
    from confluent_kafka import Producer

    client = engine.engine_or_skip()
    engine.run_block("build", engine.block_env(tmp_path / "shims"), timeout=3600)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line, f"the cluster did not come up (exit {child.wait()})"
        config = json.loads(line)
        assert config["security.protocol"] == "SASL_SSL" and config["sasl.username"] == "admin"
        producer = Producer({**config, "acks": "all"})
        for i in range(10):
            producer.produce("orders", b"%d" % i)
        assert producer.flush(60) == 0
        secrets = Path(config["ssl.ca.location"]).parents[1]  # the cluster's own folder
        assert secrets.is_dir() and engine.leftovers(client, PROJECT)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    left = wait_until(
        lambda: not engine.leftovers(client, PROJECT) and not secrets.exists(),
        timeout_s=180, what="the reaper's compose down",
    )  # fmt: skip
    assert left
