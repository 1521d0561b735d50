"""`python -m bench failover [--runs 5] [--profile demo|kafka ...]`: leader failover, controlled
shutdown, ISR shrink and isr_change propagation timed on a process-mode cluster.

One cluster per profile (ZooKeeper, 3 brokers, 1 controller; one partition, RF 3,
min.insync.replicas 2) under a probe: one acks=all single-record Produce every 5 ms to the
broker that last acknowledged, or to every broker while none is known, so the first write a new
leader takes is seen within one tick. Step times come from the processes' own event lines
(`broker_change`, `leader_elected`, `became_leader`, `isr_shrink`, `update_metadata_propagated`,
...) and the probe's send/ack times: wall-clock ms on this one machine. After each fault the
broker is started again (or resumed) and the next run waits until the ISR is full. Per profile:
`runs` SIGKILLs of the leader, `runs` controlled shutdowns of it, and `runs` follower stalls
where a stalled follower's session outlives its lag (demo, not kafka). About 3.5 minutes with
the defaults; a failed run keeps the cluster's logs and says where.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from bench.common import Section
from bench.failover_report import (
    Move,
    ProfileResult,
    StallRun,
    kill_section,
    propagation_section,
    stall_section,
    stop_section,
)
from bench.write_probe import Probe, first_ack, last_ack_before
from minibroker import localcluster
from minibroker.client import admin_zk
from minibroker.client.events import Event, EventsUnavailable, Source, read_events
from minibroker.core.types import LeaderAndIsr, TopicPartition
from minibroker.runtime.clock import now_ms
from minibroker.runtime.logging import parse_line
from minibroker.runtime.settings import Settings
from minibroker.runtime.waiting import wait_until
from minibroker.runtime.zk_store import ZkStore

T = TypeVar("T")
TP = TopicPartition("failover", 0)
# Leader moves are not wanted between runs: the preferred-leader check would move one at will.
OVERRIDES = ("auto.leader.rebalance.enable=false",)
POLL_S = 0.02


# ---- events ---------------------------------------------------------------------------------


def first_event(
    events: Iterable[Event],
    name: str | tuple[str, ...],
    after_ms: int,
    where: Callable[[Event], bool] = bool,
) -> Event | None:
    """The first event named `name` (or one of them) logged at or after `after_ms` that
    satisfies `where`."""
    names = (name,) if isinstance(name, str) else name
    return next(
        (e for e in events if e["event"] in names and e["ts"] >= after_ms and where(e)), None
    )


def _on_tp(e: Event) -> bool:
    return bool(e.get("tp") == str(TP))


# ---- the cluster ----------------------------------------------------------------------------


class Cluster:
    """A process-mode cluster with the probe's topic, its ZooKeeper session and its probe."""

    def __init__(self, state: localcluster.ClusterState, zk: ZkStore, probe: Probe) -> None:
        self.state = state
        self.zk = zk
        self.probe = probe
        self.settings = Settings.load(profile=state.profile, overrides=state.overrides)
        self.controller = state.by_role("controller")[0].name

    def ms(self, name: str) -> int:
        return self.settings.get_int(name)

    def partition_state(self) -> LeaderAndIsr:
        got = self.zk.read_partition_state(TP)
        assert got is not None, f"{TP} has no state znode"
        return got

    def events(self, name: str, since_ms: int) -> list[Event]:
        """The events of process `name` since `since_ms`: over gRPC from a running process,
        from its log file otherwise (a broker that has just shut down, or not yet started)."""
        info = self.state.process(name)
        if localcluster.is_alive(info):
            with contextlib.suppress(EventsUnavailable):  # e.g. started and not yet serving
                return self.probe.call(read_events(Source(name, info.address), since_ms, 30.0))
        lines = Path(info.log_file).read_text(errors="replace").splitlines()
        return [e for e in map(parse_line, lines) if e is not None and e["ts"] >= since_ms]

    def wait_steady(self) -> LeaderAndIsr:
        """Every replica in the ISR, the leader acknowledging probe writes sent from now and
        every broker reachable on the probe's channels."""
        since, mark = now_ms(), self.probe.mark()

        def steady() -> LeaderAndIsr | None:
            s = self.zk.read_partition_state(TP)  # None until the controller creates it
            if s is None:
                return None
            acked = any(w.ok and w.broker == s.leader for w in self.probe.since(mark))
            if len(s.isr) < 3 or not acked:
                return None
            return s if all(self.probe.reachable(b) for b in s.isr) else None

        timeout_s = 60 + 2 * self.ms("replica.lag.time.max.ms") / 1000
        return wait_until(steady, timeout_s=timeout_s, what=f"{TP} steady since {since}")

    def start_again(self, broker: int) -> None:
        localcluster.start(self.state, f"broker-{broker}")


@contextlib.contextmanager
def cluster(profile: str) -> Iterator[Cluster]:
    """A fresh cluster in its own temp dir with the topic created; torn down on exit. If the
    benchmark fails, the processes' logs are kept (the path goes to stderr)."""
    with tempfile.TemporaryDirectory(prefix="bench-failover-") as tmp:
        state = localcluster.up(
            Path(tmp) / "cluster", profile=profile, controllers=1, overrides=list(OVERRIDES)
        )
        try:
            brokers = {p.id: p.address for p in state.by_role("broker") if p.id is not None}
            with localcluster.zk_session(state.zk_connect) as zk, Probe(TP, brokers) as probe:
                config = {"min.insync.replicas": "2"}
                admin_zk.create_topic(zk, TP.topic, 1, 3, config, random.Random(0))
                c = Cluster(state, zk, probe)
                c.wait_steady()
                yield c
        except Exception:
            kept = tempfile.mkdtemp(prefix="bench-failover-logs-")
            shutil.copytree(Path(state.dir) / "logs", kept, dirs_exist_ok=True)
            print(f"failover benchmark failed; the cluster's logs are in {kept}", file=sys.stderr)
            raise
        finally:
            localcluster.down(state)


# ---- 1 and 2. the leader killed (SIGKILL) or stopped (SIGTERM: controlled shutdown) ---------


def move_run(c: Cluster, action: str) -> Move:
    """SIGKILL ("kill") or SIGTERM ("stop") the leader; start it again once a new leader
    acknowledged a write."""
    victim = c.wait_steady().leader
    mark = c.probe.mark()
    t0 = now_ms()
    localcluster.send(c.state, f"broker-{victim}", action)
    first = wait_until(
        lambda: first_ack(c.probe.since(mark), t0, not_by=victim),
        timeout_s=c.ms("zookeeper.session.timeout.ms") / 1000 + 30,
        what="a write acknowledged by a new leader",
        interval_s=POLL_S,
    )
    controller = c.events(c.controller, t0)
    change = first_event(controller, "broker_change", t0, lambda e: victim in e.get("dead", []))
    elected = first_event(controller, "leader_elected", t0, _on_tp)  # offline or controlled
    assert elected is not None, f"no leader_elected after the {action}"
    new, epoch = int(elected["leader"]), elected["leader_epoch"]
    applied = first_event(
        c.events(f"broker-{new}", t0),
        "became_leader",
        t0,
        lambda e: _on_tp(e) and e.get("leader_epoch") == epoch,
    )
    # The ISR's one other member: acks=all writes complete once it fetches from the new leader.
    (other,) = (b for b in elected["isr"] if b not in (new, victim))
    follower = first_event(
        c.events(f"broker-{other}", t0),
        ("follower_truncation_checked", "follower_truncated"),
        t0,
        lambda e: _on_tp(e) and e.get("leader") == new and bool(e.get("done")),
    )
    assert applied is not None and follower is not None, "no became_leader / truncation"
    last = last_ack_before(c.probe.since(0), first.done_ms, by=victim)
    c.start_again(victim)
    return Move(
        expiry_seen_ms=int(change["ts"]) - t0 if action == "kill" and change else None,
        elected_ms=int(elected["ts"]) - t0,
        applied_ms=int(applied["ts"]) - t0,
        follower_ms=int(follower["ts"]) - t0,
        first_write_ms=first.done_ms - t0,
        gap_ms=first.done_ms - (last.done_ms if last else t0),
    )


# ---- 3 and 4. a follower's stall: ISR shrink, expand, isr_change -> UpdateMetadata ----------


def stall_run(c: Cluster, index: int) -> StallRun:
    s = c.wait_steady()
    follower = [b for b in s.isr if b != s.leader][index % 2]
    leader_name, follower_name = f"broker-{s.leader}", f"broker-{follower}"
    t0 = now_ms()
    localcluster.send(c.state, follower_name, "pause")
    lag_s = c.ms("replica.lag.time.max.ms") / 1000
    wait_until(
        lambda: follower not in c.partition_state().isr,
        timeout_s=2 * lag_s + 30,
        what=f"{follower_name} out of the ISR",
        interval_s=POLL_S,
    )
    resumed = now_ms()
    localcluster.send(c.state, follower_name, "resume")
    wait_until(
        lambda: follower in c.partition_state().isr,
        timeout_s=lag_s + 60,
        what=f"{follower_name} back in the ISR",
        interval_s=POLL_S,
    )

    def changed(e: Event) -> bool:
        return _on_tp(e) and follower in e.get("changed", [])

    events = c.events(leader_name, t0)
    shrink = first_event(events, "isr_shrink", t0, changed)
    expand = first_event(events, "isr_expand", resumed, changed)
    assert shrink is not None and expand is not None, "no isr_shrink / isr_expand event"

    def propagated() -> list[Event] | None:
        got = [
            e
            for e in c.events(c.controller, t0)
            if e["event"] == "update_metadata_propagated" and e.get("cause") == "isr_change"
        ]
        return got if got and got[-1]["ts"] >= expand["ts"] else None

    # The node comes after a quiet blackout, checked every propagation interval.
    wait_s = sum(
        c.ms(f"minibroker.isr.change.propagation.{k}.ms") for k in ("blackout", "interval")
    )
    done = wait_until(
        propagated, timeout_s=wait_s / 1000 + 30, what="UpdateMetadata", interval_s=0.2
    )
    return StallRun(
        shrink_ms=int(shrink["ts"]) - t0,
        expand_ms=int(expand["ts"]) - resumed,
        propagated_ms=tuple(
            int(e["took_ms"])
            for e in done
            if e["ts"] - e["took_ms"] >= resumed and not e.get("not_answered")
        ),
        applied_ms=tuple(broker_side_propagation(c, resumed)),
    )


def broker_side_propagation(c: Cluster, since_ms: int) -> list[int]:
    """Per isr_change node written since `since_ms`: ms from its writer's
    `isr_change_notification_created` line to the last broker's next `metadata_updated`."""
    by_broker = {p.name: c.events(p.name, since_ms) for p in c.state.by_role("broker")}
    out = []
    for events in by_broker.values():
        for created in (e for e in events if e["event"] == "isr_change_notification_created"):
            applied = [
                first_event(other, "metadata_updated", created["ts"])
                for other in by_broker.values()
            ]
            if all(a is not None for a in applied):
                out.append(max(int(a["ts"]) for a in applied if a) - int(created["ts"]))
    return out


# ---- figures and tables ---------------------------------------------------------------------


def measure_profile(profile: str, runs: int, stall_runs: int) -> ProfileResult:
    with cluster(profile) as c:
        kills = [move_run(c, "kill") for _ in range(runs)]
        stops = [move_run(c, "stop") for _ in range(runs)]
        stalls = [stall_run(c, i) for i in range(stall_runs)]
        return ProfileResult(
            profile,
            session_ms=c.ms("zookeeper.session.timeout.ms"),
            lag_ms=c.ms("replica.lag.time.max.ms"),
            fetch_backoff_ms=c.ms("replica.fetch.backoff.ms"),
            kills=kills,
            stops=stops,
            stalls=stalls,
        )


def stall_possible(session_ms: int, lag_ms: int) -> bool:
    """A SIGSTOPped follower is taken out by its leader (the rule measured) only if its session
    outlives the stall, which lasts up to 1.5 lag plus our reaction; otherwise the controller
    removes it on session expiry (Kafka 2.6's defaults: 18 s session, 30 s lag)."""
    return session_ms > 1.5 * lag_ms + 1000


def measure(runs: int = 5, profiles: Sequence[str] = ("demo", "kafka")) -> list[Section]:
    """`runs` SIGKILLs and controlled shutdowns of the leader per profile, and `runs` follower
    stalls where the profile's session outlives one (see `stall_possible`)."""
    results = []
    for profile in profiles:
        s = Settings.load(profile=profile)
        session_ms = s.get_int("zookeeper.session.timeout.ms")
        stalls = runs if stall_possible(session_ms, s.get_int("replica.lag.time.max.ms")) else 0
        results.append(measure_profile(profile, runs, stalls))
    return [
        kill_section(results),
        stop_section(results),
        stall_section(results),
        propagation_section(results),
    ]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=int, default=5, help="runs per measurement (default 5)")
    parser.add_argument(
        "--profile",
        action="append",
        choices=["demo", "kafka"],
        help="timing profile; repeat for several (default: demo and kafka)",
    )


def main(args: argparse.Namespace) -> None:
    for section in measure(args.runs, tuple(args.profile or ("demo", "kafka"))):
        print(f"## {section.title}\n\n{section.markdown}\n")
        for name, value in sorted(section.figures.items()):
            print(f"{name} = {value:g}")
        print(flush=True)
