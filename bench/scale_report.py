"""The scale benchmark's results: what one run measured (ScaleRun, Failover), the named
figures the goals table reads, and the markdown tables."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bench.common import md_table
from bench.scale_probes import IDLE_WINDOW_S, REPLICATION_FACTOR, SETTLE_S


@dataclass
class Failover:
    victim: str
    moved: int  # leaderships the victim held
    expiry_after_kill_s: float  # the controller's broker_change event
    moved_after_expiry_s: float  # the last new leader written in ZooKeeper (state mtime)
    applied_after_expiry_s: float  # the last `became_leader` on the new leaders
    returned_s: float | None = None  # restart until it is in every ISR again


@dataclass
class ScaleRun:
    partitions: int
    profile: str
    startup_s: float | None = None
    states_written_s: float | None = None  # creation until the last state znode was created
    cpu_pct: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    failover: Failover | None = None
    open_files_limit: int = 0
    created_ms: int = 0  # wall clock when the topic was created
    failed: str | None = None  # the phase that did not finish, and what was measured by then
    # SIGTERM to the busiest leader: (leaderships, s until all moved in ZooKeeper, s to exit)
    shutdown: tuple[int, float, float] | None = None
    wall_s: float = 0.0


def figures(run: ScaleRun) -> dict[str, float]:
    """The named values the goals table reads; only those this run measured."""
    n = run.partitions
    out: dict[str, float] = {}
    if run.startup_s is not None:
        out[f"scale.{n}.startup_s"] = round(run.startup_s, 2)
    brokers = [v for k, v in run.cpu_pct.items() if k.startswith("broker-")]
    if brokers:
        out[f"scale.{n}.idle_cpu_pct_max"] = round(max(brokers), 2)
    controllers = [v for k, v in run.cpu_pct.items() if k.startswith("controller-")]
    if controllers:
        out[f"scale.{n}.idle_cpu_pct_controller"] = round(max(controllers), 2)
    rss = [v for k, v in run.rss.items() if k.startswith("broker-")]
    if rss:
        out[f"scale.{n}.rss_mb_max"] = round(max(rss), 1)
    f = run.failover
    if f is not None:
        out[f"scale.{n}.moved_after_expiry_s"] = round(f.moved_after_expiry_s, 3)
        out[f"scale.{n}.applied_after_expiry_s"] = round(f.applied_after_expiry_s, 3)
        out[f"scale.{n}.moved_after_kill_s"] = round(
            f.expiry_after_kill_s + f.moved_after_expiry_s, 3
        )
        out[f"scale.{n}.leaderships_moved"] = float(f.moved)
    if run.shutdown is not None:
        out[f"scale.{n}.controlled_shutdown_led"] = float(run.shutdown[0])
        out[f"scale.{n}.controlled_shutdown_moved_s"] = round(run.shutdown[1], 3)
        out[f"scale.{n}.controlled_shutdown_exit_s"] = round(run.shutdown[2], 3)
    return out


def _s(value: float | None, digits: int = 2) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def markdown(runs: Iterable[ScaleRun]) -> str:
    runs = list(runs)
    summary = md_table(
        [
            "partitions",
            "start-up s",
            "states in ZK s",
            "leaderships moved",
            "expiry after kill s",
            "moved after expiry s",
            "applied after expiry s",
            "broker back in ISRs s",
            "controlled shutdown: led / moved s / exited s",
            "run s",
        ],
        [
            [
                r.partitions,
                _s(r.startup_s),
                _s(r.states_written_s),
                r.failover.moved if r.failover else "-",
                _s(r.failover.expiry_after_kill_s if r.failover else None),
                _s(r.failover.moved_after_expiry_s if r.failover else None, 3),
                _s(r.failover.applied_after_expiry_s if r.failover else None, 3),
                _s(r.failover.returned_s if r.failover else None),
                (
                    f"{r.shutdown[0]} / {r.shutdown[1]:.2f} / {r.shutdown[2]:.2f}"
                    if r.shutdown
                    else "-"
                ),
                f"{r.wall_s:.0f}",
            ]
            for r in runs
        ],
    )
    names = sorted({name for r in runs for name in r.rss})
    per_process = md_table(
        ["partitions", *(f"{n} CPU% / RSS MB" for n in names)],
        [
            [
                r.partitions,
                *(
                    f"{_s(r.cpu_pct.get(n), 1)} / {_s(r.rss.get(n), 0)}" if n in r.rss else "-"
                    for n in names
                ),
            ]
            for r in runs
        ],
    )
    failed = [
        f"- {r.partitions} partitions did not finish (open-file limit {r.open_files_limit}): "
        f"{r.failed}"
        for r in runs
        if r.failed
    ]
    profile = runs[0].profile if runs else ""
    text = (
        f"One topic of N partitions x RF {REPLICATION_FACTOR} on 3 brokers, 1 controller and "
        f"ZooKeeper (profile {profile}). Start-up: topic creation until every replica serves "
        "(one leader with a full ISR, both followers fetched from it); states in ZK: until the "
        "controller created the last state znode. Failover: SIGKILL of the broker leading most "
        "partitions; expiry = the controller's broker_change event, moved = the last new "
        "leader's state znode mtime, applied = the last became_leader on a new leader; back "
        "in ISRs: the killed broker's restart until ZooKeeper has it in every ISR. Controlled "
        "shutdown, last, after a preferred replica election of every partition (leadership "
        "back to a third per broker, as Kafka's automatic rebalance would do): SIGTERM to the "
        "broker then leading most partitions; moved = the controller's last leader_elected "
        "for them, exited = the process gone.\n\n"
        f"{summary}\n\nIdle, {IDLE_WINDOW_S:.0f} s after a {SETTLE_S:.0f} s settle (100% = one "
        f"core):\n\n{per_process}"
    )
    return text + ("\n\n" + "\n".join(failed) if failed else "")
