"""The compose cluster on the real Docker engine: deploy/docker-compose.yml with the images
deploy/build-images.sh makes, an acks=all producer on the host through the published ports, and
every fault of deploy/README.md: kill a broker's container, start it, stop a broker (controlled
shutdown), pause and unpause a follower, kill the active controller, isolate a leader from
everything, and cut a leader from ZooKeeper only.
Every command is deploy/README.md's walkthrough block of that step, run as written. At the end
no acknowledged record is lost, the replicas' logs are byte-identical below the HW,
`minibroker events` tells the story, and `down -v` leaves nothing behind.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import pytest

from minibroker.runtime.clock import now_ms
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore
from tests.compose import engine
from tests.walkthrough import (
    PARTITIONS,
    TOPIC,
    WAIT_S,
    Event,
    Load,
    Steps,
    Timeline,
    changed,
    is_,
    isr,
    leader,
    preferred,
    read_all,
    render,
)

pytestmark = [pytest.mark.compose, pytest.mark.integration]

DEMO = Settings.load(profile="demo")
SESSION_MS = DEMO.get_int("zookeeper.session.timeout.ms")
LAG_MS = DEMO.get_int("replica.lag.time.max.ms")
# A loaded 2-core machine: scheduling, fetch waits, the ZooKeeper tick. 1 s was once 0.22 s
# short (8.22 s to a new leader) with a unit suite running beside the cluster, and 2 s was
# 0.29 s short in a clean clone's run on a busy day (2026-11-28, 9.29 s). 4 s still fails a
# failover that waited for anything but the session's expiry (another 6 s).
SLACK_MS = 4000
EARLY_MS = 2000  # how early a shrink may come (the lag measured from an earlier fetch)


mb = engine.mb


def test_the_walkthrough_survives_every_fault(
    client: Any, up_seconds: float, block_env: dict[str, str]
) -> None:
    print(f"\nevery service healthy {up_seconds:.1f} s after `up`")
    assert up_seconds <= 30, engine.logs()
    engine.run_block("topic", block_env)
    zk = ZkStore(engine.ZK, session_timeout_ms=10_000)
    zk.start()
    timeline = Timeline(["--zk", engine.ZK])
    load = Load(engine.BOOTSTRAP)
    steps: Steps = []

    def step(block: str) -> int:
        """Run deploy/README.md's walkthrough block `block`; when it started."""
        at = now_ms()
        engine.run_block(block, block_env)
        steps.append((block, at, []))
        return at

    def expect(at: int, what: str, pred: Callable[[Event], bool]) -> Event:
        ev = timeline.wait(at, what, pred)
        steps[-1][2].append((what, ev))
        return ev

    def writes_go_on() -> None:
        count = len(load.acked)
        wait_until(lambda: len(load.acked) > count + 20, timeout_s=WAIT_S, what="more acks")

    def in_every_isr(broker: int) -> None:
        wait_until(lambda: all(broker in isr(zk, p) for p in range(PARTITIONS)),
                   timeout_s=WAIT_S, what=f"broker {broker} in every ISR")  # fmt: skip

    def balance() -> None:
        step("balance")
        wait_until(
            lambda: all(leader(zk, p) == preferred(zk, p) for p in range(PARTITIONS)),
            timeout_s=WAIT_S,
            what="every partition led by its preferred replica",
        )

    def dead(broker: int) -> Callable[[Event], bool]:
        return lambda e: e["event"] == "broker_change" and broker in e.get("dead", [])

    try:
        wait_until(lambda: len(load.acked) > 50, timeout_s=WAIT_S, what="the first acks")

        # 1. Kill broker-2: new leaders from the ISR once its session expires.
        led = [p for p in range(PARTITIONS) if leader(zk, p) == 2]
        assert led, "broker 2 leads nothing after the topic's creation"
        at = step("kill")
        tp = f"{TOPIC}-{led[0]}"
        elected = expect(at, f"new leader of {tp}", lambda e: e["event"] == "leader_elected"
                         and e.get("tp") == tp)  # fmt: skip
        assert elected["ts"] - at <= SESSION_MS + 1000 + SLACK_MS, render(steps)
        assert all(leader(zk, p) != 2 for p in range(PARTITIONS))
        writes_go_on()

        # 2. Start it again: it registers, catches up and rejoins every ISR.
        at = step("start")
        expect(at, "broker 2 registers", is_("broker_registered", broker_id=2))
        in_every_isr(2)

        # 3. Stop it: controlled shutdown moves its leaderships before its znode goes.
        balance()
        at = step("stop")
        shutdown = expect(at, "the controller moves its leaderships", is_("controlled_shutdown"))
        gone = expect(at, "broker 2's znode goes", dead(2))
        assert shutdown["ts"] <= gone["ts"], render(steps)
        assert all(leader(zk, p) != 2 for p in range(PARTITIONS))
        writes_go_on()
        at = step("start-again")
        in_every_isr(2)

        # 4-5. Pause a follower: shrink after lag..1.5*lag, the isr_change node, UpdateMetadata
        # to every live broker; unpause: it rejoins.
        balance()
        at = step("pause")
        shrink = expect(at, "a leader drops broker 3 from the ISR", changed("isr_shrink", 3))
        took = shrink["ts"] - at
        assert LAG_MS - EARLY_MS <= took <= LAG_MS * 1.5 + SLACK_MS, render(steps)
        at = step("unpause")
        expect(at, "broker 3 back in the ISR", lambda e: changed("isr_expand", 3)(e)
               and e["tp"] == shrink["tp"])  # fmt: skip
        node = expect(at, "isr_change node written", lambda e: e["proc"] == shrink["proc"]
                      and e["event"] == "isr_change_notification_created"
                      and shrink["tp"] in e["partitions"])  # fmt: skip
        name = node["path"].rsplit("/", 1)[-1]
        expect(at, "the controller reads it", lambda e: e["event"] == "isr_change_processed"
               and name in e["nodes"])  # fmt: skip
        expect(at, "UpdateMetadata reaches every broker", lambda e:
               e["event"] == "update_metadata_propagated" and name in e["nodes"]
               and e["brokers"] == [1, 2, 3])  # fmt: skip
        in_every_isr(3)

        # 6. Kill the active controller: the standby takes over, and elects later (step 7).
        active = zk.read_controller()
        assert active is not None
        at = step("kill-controller")
        expect(at, "the standby is elected", lambda e: e["event"] == "controller_elected"
               and e.get("controller_id") != active)  # fmt: skip

        # 7. Isolate the leader of partition 0 from everything: fenced; rejoins on heal.
        balance()
        victim = leader(zk, 0)
        at = step("isolate")
        expect(at, f"broker {victim} declared dead", dead(victim))
        wait_until(lambda: leader(zk, 0) not in (victim, -1), timeout_s=WAIT_S,
                   what="a new leader of partition 0")  # fmt: skip
        writes_go_on()
        at = step("heal")
        expect(at, f"broker {victim} registers again", is_("broker_registered", broker_id=victim))
        in_every_isr(victim)

        # 8. Cut the leader of partition 0 from ZooKeeper only: its session expires, the
        # controller elects a new leader; the old one, still reaching the brokers, is fenced by
        # the new epoch; nothing acknowledged is lost around it.
        balance()
        victim = leader(zk, 0)
        at = step("cut-zookeeper")
        expect(at, f"broker {victim} declared dead", dead(victim))
        wait_until(lambda: leader(zk, 0) not in (victim, -1), timeout_s=WAIT_S,
                   what="a new leader of partition 0")  # fmt: skip
        writes_go_on()
        at = step("heal")
        expect(at, f"broker {victim} registers again", is_("broker_registered", broker_id=victim))
        in_every_isr(victim)
        writes_go_on()
    except BaseException:
        print(_diagnostics())
        raise
    finally:
        load.stop()
        timeline.close()
        zk.stop()
        print("\n" + render(steps))

    # No acknowledged record lost; the replicas hold the same bytes below the HW.
    got = asyncio.run(read_all(engine.BOOTSTRAP))
    lost = [k for k, v in load.acked.items() if got.get(k) != v]
    values = [v for v in got.values() if v is not None]
    twice = len(values) - len(set(values))
    print(f"{len(load.acked)} acked (acks=all), {load.failed} sends failed, {len(lost)} lost, "
          f"{twice} records written twice by retries")  # fmt: skip
    assert not lost, f"acknowledged records lost: {lost[:10]}"
    for p in range(PARTITIONS):
        (desc,) = [d for d in _describe() if d["partition"] == p]
        hw = min(
            r["high_watermark"] for r in desc["replicas_state"] if r["broker"] == desc["leader"]
        )
        copies = {b: engine.committed_batches(client, b, TOPIC, p, hw) for b in desc["isr"]}
        first = copies[desc["leader"]]
        assert first, f"partition {p}: nothing below the HW {hw}"
        assert all(batches == first for batches in copies.values()), f"partition {p} differs"

    # The story as a user reads it: the live processes' events through ZooKeeper; with
    # --compose also what killed and restarted nodes logged (the controller killed in step 6
    # had elected itself and done step 3's controlled shutdown).
    live = mb("events", "--zk", engine.ZK).stdout
    for word in ("leader_elected", "isr_shrink", "isr_expand", "controller_elected",
                 "zk_session_expired", "broker_registered"):  # fmt: skip
        assert word in live, f"`minibroker events --zk` lacks {word}"
    whole = mb("events", "--compose", engine.PROJECT, "--zk", engine.ZK)
    killed = f"controller-{active - 100}"
    assert f"{killed} is not registered: its events come from its container's log" in (whole.stderr)
    for words in (f"controller {active} elected", "controlled_shutdown", "isr_change_processed"):
        assert words in whole.stdout, f"`minibroker events --compose` lacks {words}"
    assert len(whole.stdout.splitlines()) > len(live.splitlines())


def _diagnostics() -> str:
    """What a failed step leaves to read: the partitions, the timeline's end, the brokers' logs."""
    describe = mb("topics", "describe", TOPIC, "--zk", engine.ZK, check=False)
    events = mb("events", "--zk", engine.ZK, check=False).stdout.splitlines()[-80:]
    return "\n".join(
        ["--- topics describe", describe.stdout + describe.stderr, "--- the last events",
         *events, "--- logs", engine.logs(30)]
    )  # fmt: skip


def _describe() -> list[dict[str, Any]]:
    parsed = json.loads(mb("topics", "describe", TOPIC, "--json", "--zk", engine.ZK).stdout)
    assert isinstance(parsed, list)
    return parsed
