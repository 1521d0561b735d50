"""The live dashboard on the Docker engine: the compose file's `dashboard` service, published on
the host's 127.0.0.1:8090, shows the compose cluster as `topics describe --json` does, in a
real browser; the host's `minibroker dashboard --compose` acts on the containers through the
fault endpoint its buttons use (pause a follower: it leaves the ISR on the page; resume it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from minibroker import topology as t
from minibroker.runtime.waiting import wait_until
from tests.browser.browser import browser_or_skip, console_errors, dashboard, get_json
from tests.compose import engine

pytestmark = [pytest.mark.compose, pytest.mark.integration, pytest.mark.browser]

URL = f"http://127.0.0.1:{t.DASHBOARD_PORT}"
TOPIC = "dash"


def mb(*args: str) -> str:
    return subprocess.run(
        [sys.executable, "-m", "minibroker.cli.main", *args],
        capture_output=True, text=True, check=True, stdin=subprocess.DEVNULL, timeout=120,
        env=engine.cli_env(),
    ).stdout  # fmt: skip


def page_rows(driver: Any) -> dict[str, dict[str, str]]:
    got: dict[str, dict[str, str]] = driver.execute_script(
        """
        const out = {};
        for (const tr of document.querySelectorAll('#partitions tr[data-topic]'))
          out[tr.dataset.key] = {leader: tr.dataset.leader, isr: tr.dataset.isr,
                                 epoch: tr.dataset.leaderEpoch};
        return out;
        """
    )
    return got


def described() -> dict[str, dict[str, str]]:
    out = json.loads(mb("topics", "describe", TOPIC, "--json", "--zk", engine.ZK))
    return {
        f"{p['topic']}-{p['partition']}": {
            "leader": str(p["leader"]),
            "isr": ",".join(str(b) for b in sorted(p["isr"])),
            "epoch": str(p["leader_epoch"]),
        }
        for p in out
    }


def test_the_dashboard_service_shows_the_compose_cluster(client: Any, up_seconds: float) -> None:
    mb("topics", "create", TOPIC, "--partitions", "2", "--replication-factor", "3",
       "--if-not-exists", "--wait", "--zk", engine.ZK)  # fmt: skip

    # After the walkthrough (run first in CI) a killed controller stays down: no standby then.
    def settled() -> dict[str, Any] | None:
        s: dict[str, Any] = get_json(f"{URL}/api/state")
        alive = sorted(b["id"] for b in s["brokers"] if b["alive"])
        return s if alive == [1, 2, 3] and s["controller"]["active"] is not None else None

    state = wait_until(settled, timeout_s=30, what="all brokers and a controller on the page")
    assert state["controller"]["name"] not in state["controller"]["standby"]
    driver = browser_or_skip()
    try:
        driver.get(URL)
        wait_until(
            lambda: (
                {k: v for k, v in page_rows(driver).items() if k.startswith(TOPIC)} == described()
            ),
            timeout_s=30,
            what="the dashboard's rows to match `topics describe --json`",
        )
        assert console_errors(driver) == []
    finally:
        driver.quit()


def test_the_hosts_dashboard_pauses_a_container_through_its_fault_endpoint(
    client: Any, up_seconds: float, tmp_path: Path
) -> None:
    with dashboard(
        "--compose", engine.PROJECT, "--zk", engine.ZK, log=tmp_path / "dash.log"
    ) as url:
        session = get_json(f"{url}/api/session")
        assert session["faults"] == "compose"
        key = f"{TOPIC}-0"
        row = wait_until(
            lambda: next(
                (
                    p
                    for p in get_json(f"{url}/api/state")["partitions"]
                    if p["key"] == key and len(p["isr"]) == 3
                ),
                None,
            ),  # fmt: skip
            timeout_s=30,
            what=f"{key} with a full ISR",
        )
        follower = next(b for b in row["replicas"] if b != row["leader"])
        name = f"broker-{follower}"
        paused = fault(url, session["token"], "pause", name)
        assert paused["ok"], paused
        try:
            wait_until(
                lambda: (
                    follower
                    not in next(
                        p for p in get_json(f"{url}/api/state")["partitions"] if p["key"] == key
                    )["isr"]
                ),
                timeout_s=30,
                what=f"{name} out of {key}'s ISR",
            )
            # A fault that cannot be carried out is one line saying why, not a trace.
            running = f"broker-{row['leader']}"
            again = fault(url, session["token"], "start", running)
            assert not again["ok"] and f"{running} is already running" in again["message"]
        finally:
            resumed = fault(url, session["token"], "resume", name)
            assert resumed["ok"], resumed

        def isr_size() -> int:
            state = get_json(f"{url}/api/state")
            return len(next(p for p in state["partitions"] if p["key"] == key)["isr"])

        wait_until(lambda: isr_size() == 3, timeout_s=60, what=f"{name} back in {key}'s ISR")
        # A resumed container reads unhealthy until its next check passes, and compose refuses
        # to start what depends on it until then (the load generator's tests run next).
        wait_until(
            lambda: engine.health(client, name) == "healthy",
            timeout_s=60,
            what=f"{name}'s healthcheck to pass again",
        )


def fault(url: str, token: str, action: str, target: str) -> dict[str, Any]:
    req = urllib.request.Request(
        f"{url}/api/fault",
        data=json.dumps({"action": action, "target": target}).encode(),
        headers={"Content-Type": "application/json", "X-Minibroker-Token": token},
        method="POST",
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            answer: dict[str, Any] = json.loads(r.read())
    except urllib.error.HTTPError as exc:
        answer = json.loads(exc.read())
    return answer
