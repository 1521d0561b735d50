"""deploy/README.md's chaos walkthrough, run in process mode: the same 3 brokers and 2
controllers with the demo timings, an acks=all producer, and each step of the README (kill,
start, stop, start, pause, unpause, kill the active controller) through `minibroker cluster`.
A live `minibroker events --follow` must show each step's consequences in order; the timeline
with its timings is printed (`pytest -s`), and no acknowledged record may be lost.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

from minibroker.runtime.clock import now_ms
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.integration.conftest import cli, running_cluster
from tests.walkthrough import (
    PARTITIONS,
    TOPIC,
    WAIT_S,
    Event,
    Load,
    Timeline,
    changed,
    is_,
    isr,
    leader,
    preferred,
    print_timeline,
    read_all,
    render,
)

pytestmark = pytest.mark.integration

LOGGING_SKEW_MS = 250  # how much later than its effect a loaded process may log its cause


def test_the_deploy_readme_chaos_walkthrough_in_process_mode(tmp_path: Path) -> None:
    d = tmp_path / "cluster"
    with running_cluster(d) as state:  # the compose cluster's shape: 3 brokers, 2 controllers

        def mb(*args: str) -> None:
            cli(*args, "--dir", str(d))

        mb("topics", "create", TOPIC, "--partitions", str(PARTITIONS),
           "--replication-factor", "3", "--config", "min.insync.replicas=2", "--wait")  # fmt: skip
        zk = ZkStore(state.zk_connect, session_timeout_ms=10_000)
        zk.start()
        timeline = Timeline(["--dir", str(d)])
        bootstrap = [p.address for p in state.by_role("broker")]
        load = Load(bootstrap)
        steps: list[tuple[str, int, list[tuple[str, Event]]]] = []
        try:
            wait_until(lambda: len(load.acked) > 50, timeout_s=WAIT_S, what="the first acks")

            def step(title: str, *command: str) -> int:
                at = now_ms()
                mb(*(command if command[0] == "topics" else ("cluster", *command)))
                steps.append((title, at, []))
                return at

            def expect(at: int, what: str, pred: Callable[[Event], bool]) -> Event:
                ev = timeline.wait(at, what, pred)
                steps[-1][2].append((what, ev))
                return ev

            # 1. Hard kill: nothing happens until broker-2's session expires.
            at = step("docker compose kill broker-2", "kill", "broker-2")
            expect(at, "controller sees broker 2 dead", lambda e: e["event"] == "broker_change"
                   and 2 in e.get("dead", []))  # fmt: skip
            # 2. Start it again: it registers, catches up and rejoins every ISR.
            at = step("docker compose start broker-2", "start", "broker-2")
            expect(at, "broker 2 registers", is_("broker_registered", broker_id=2))
            expect(at, "broker 2 back in an ISR", changed("isr_expand", 2))
            wait_until(lambda: all(2 in isr(zk, p) for p in range(PARTITIONS)),
                       timeout_s=WAIT_S, what="broker 2 in every ISR")  # fmt: skip
            # 3. Clean stop: the controller moves broker-2's leaderships first.
            at = step("docker compose stop broker-2", "stop", "broker-2")
            expect(at, "controller handles the controlled shutdown", is_("controlled_shutdown"))
            expect(at, "controller sees broker 2 gone", lambda e: e["event"] == "broker_change"
                   and 2 in e.get("dead", []))  # fmt: skip
            at = step("docker compose start broker-2", "start", "broker-2")
            expect(at, "broker 2 back in an ISR", changed("isr_expand", 2))
            wait_until(lambda: all(2 in isr(zk, p) for p in range(PARTITIONS)),
                       timeout_s=WAIT_S, what="broker 2 in every ISR")  # fmt: skip
            # Restarts pile leaderships up on the brokers that stayed; the preferred election
            # spreads them again, so broker-3 follows two partitions and leads one.
            at = step("minibroker topics elect-preferred", "topics", "elect-preferred", "--wait")
            wait_until(
                lambda: all(leader(zk, p) == preferred(zk, p) for p in range(PARTITIONS)),
                timeout_s=WAIT_S,
                what="every partition led by its preferred replica",
            )
            # 4. Pause a follower: its leaders shrink the ISR after lag..1.5*lag; the change
            # reaches the controller as an isr_change node and every broker as UpdateMetadata.
            at = step("docker compose pause broker-3", "pause", "broker-3")
            shrink = expect(at, "a leader drops broker 3 from the ISR", changed("isr_shrink", 3))
            # 5. Unpause before its session (6 s) expires: it catches up and rejoins; after a
            # quiet 5 s the leader writes one isr_change node for both changes.
            at = step("docker compose unpause broker-3", "resume", "broker-3")
            expect(at, "broker 3 back in an ISR", lambda e: changed("isr_expand", 3)(e)
                   and e["tp"] == shrink["tp"])  # fmt: skip
            node = expect(at, "isr_change node written", lambda e: e["proc"] == shrink["proc"]
                          and e["event"] == "isr_change_notification_created"
                          and shrink["tp"] in e["partitions"])  # fmt: skip
            name = node["path"].rsplit("/", 1)[-1]
            expect(at, "controller reads the isr_change node", lambda e:
                   e["event"] == "isr_change_processed" and name in e["nodes"])  # fmt: skip
            expect(at, "UpdateMetadata reaches every broker", lambda e:
                   e["event"] == "update_metadata_propagated" and name in e["nodes"]
                   and e["brokers"] == [1, 2, 3])  # fmt: skip
            # 6. Kill the active controller: the standby wins /controller.
            active = zk.read_controller()
            name = next(p.name for p in state.by_role("controller") if p.id == active)
            at = step(f"docker compose kill {name} (the active controller)", "kill", name)
            expect(at, "the standby is elected", lambda e: e["event"] == "controller_elected"
                   and e.get("controller_id") != active)  # fmt: skip
            count = len(load.acked)
            wait_until(lambda: len(load.acked) > count + 20, timeout_s=WAIT_S, what="more acks")
        finally:
            load.stop()
            err = timeline.close()
            zk.stop()

        got = asyncio.run(read_all(bootstrap))
        lost = [k for k, v in load.acked.items() if got.get(k) != v]
        print_timeline(steps)
        print(f"{len(load.acked)} records acked (acks=all), {load.failed} sends failed, "
              f"{len(lost)} acked records lost")  # fmt: skip
        assert not lost, f"acknowledged records lost: {lost[:10]}"
        # Every step's consequences came after the step, in the order the README tells them.
        # An event's time is when its process logged it, after the action returned: a broker
        # slowed by load may log "isr_change node written" a few ms after the controller logged
        # reading that node. Causality is checked by the events' contents (the node's name);
        # the order of times across processes only up to that logging delay.
        times = [ev["ts"] for _, at, seen in steps for _, ev in seen]
        assert all(ev["ts"] >= at for _, at, seen in steps for _, ev in seen)
        late = [(a, b) for a, b in itertools.pairwise(times) if b < a - LOGGING_SKEW_MS]
        assert not late, render(steps)
        assert "following controller-2" in err or "following controller-1" in err

        # The same timeline as a user reads it, in words.
        text = cli("events", "--dir", str(d), "--event", "isr_shrink", "--event",
                   "update_metadata_propagated").stdout  # fmt: skip
        assert "ISR shrink demo-" in text and "last caught up" in text
        assert "UpdateMetadata to " in text
