"""The failover benchmark's tables: SIGKILL failover broken into steps, controlled-shutdown
gaps, ISR shrink against the lag window, isr_change propagation (from measured ProfileResults)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from bench.common import Section, md_table


@dataclass(frozen=True)
class Move:
    """One leadership move after the leader got `action` at t0; every time is ms since t0."""

    expiry_seen_ms: int | None  # kill: the controller's broker_change naming it dead
    elected_ms: int  # leader_elected: the new state written to ZooKeeper
    applied_ms: int  # became_leader on the new leader (LeaderAndIsr applied)
    follower_ms: int  # the other ISR follower done truncating against the new leader
    first_write_ms: int  # the first probe write the new leader acknowledged
    gap_ms: int  # the old leader's last acknowledgement -> the new leader's first


@dataclass(frozen=True)
class StallRun:
    shrink_ms: int  # SIGSTOP of a follower -> the leader's isr_shrink removing it
    expand_ms: int  # SIGCONT -> the leader's isr_expand adding it back
    # Per isr_change node written after the resume (a node written during the pause waits for
    # the paused broker's answer): the controller's took_ms (node ctime -> every broker
    # answered UpdateMetadata), and broker-side (the writer's notification_created line -> the
    # last broker's metadata_updated line).
    propagated_ms: tuple[int, ...]
    applied_ms: tuple[int, ...]


@dataclass
class ProfileResult:
    profile: str
    session_ms: int
    lag_ms: int
    fetch_backoff_ms: int
    kills: list[Move]
    stops: list[Move]
    stalls: list[StallRun]

    def backoffs(self, moves: Iterable[Move]) -> int:
        """Moves whose follower step shows a fetch backoff (see `backoff_note`)."""
        return sum(1 for m in moves if m.follower_ms - m.applied_ms >= 0.8 * self.fetch_backoff_ms)


def _med(values: Sequence[float | None]) -> float:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else float("nan")


def _move_row(label: str, moves: Sequence[Move], steps: Sequence[str], in_s: bool) -> list[str]:
    """Median time of each step since t0 (+ since the step before), then the write gap."""
    meds = [_med([getattr(m, step) for m in moves]) for step in steps]
    scale, digits, unit = (1000, 3, " s") if in_s else (1, 0, "")
    cells = [
        f"{ms / scale:.{digits}f}{unit} (+{(ms - prev) / scale:.{digits}f})"
        for ms, prev in zip(meds, [0.0, *meds], strict=False)
    ]
    gap = _med([m.gap_ms for m in moves]) / scale
    return [label, *cells, f"{gap:.{digits}f}{unit}"]


def _move_rows(
    results: Sequence[ProfileResult],
    pick: Callable[[ProfileResult], list[Move]],
    steps: Sequence[str],
    in_s: bool,
) -> list[list[str]]:
    rows = []
    for r in results:
        rows += [_move_row(f"{r.profile} #{i}", [m], steps, in_s) for i, m in enumerate(pick(r), 1)]
        rows.append(_move_row(f"**{r.profile} median**", pick(r), steps, in_s))
    return rows


KILL_STEPS = ("expiry_seen_ms", "elected_ms", "applied_ms", "follower_ms", "first_write_ms")
STOP_STEPS = KILL_STEPS[1:]


def backoff_note(
    results: Sequence[ProfileResult], pick: Callable[[ProfileResult], list[Move]]
) -> str:
    counts = ", ".join(
        f"{r.profile} {r.backoffs(pick(r))} of {len(pick(r))} "
        f"(replica.fetch.backoff.ms {r.fetch_backoff_ms})"
        for r in results
    )
    return (
        "Runs where the follower step took at least 0.8 x replica.fetch.backoff.ms (its first "
        "OffsetsForLeaderEpoch reached the new leader before that leader's LeaderAndIsr, was "
        f"answered UNKNOWN_LEADER_EPOCH, and the follower backed off): {counts}."
    )


STEP_TEXT = (
    "`leader_elected` (the new state in ZooKeeper), `became_leader` on the new leader "
    "(LeaderAndIsr applied), the other ISR follower done truncating against it (it fetches "
    "from it from then on: acks=all writes can complete), the first probe write it "
    "acknowledged. Write gap: the old leader's last acknowledgement to the new leader's first."
)


def kill_section(results: Sequence[ProfileResult]) -> Section:
    figures: dict[str, float] = {}
    for r in results:
        p = f"failover.{r.profile}"
        figures[f"{p}.session_ms"] = float(r.session_ms)
        figures[f"{p}.runs"] = float(len(r.kills))
        figures[f"{p}.follower_backoffs"] = float(r.backoffs(r.kills))
        for step in (*KILL_STEPS, "gap_ms"):
            name = {"gap_ms": "write_gap_s"}.get(step, step.removesuffix("_ms") + "_s")
            figures[f"{p}.{name}"] = round(_med([getattr(m, step) for m in r.kills]) / 1000, 3)
    header = ["run", "expiry seen", "elected", "applied", "follower", "first write", "write gap"]
    sessions = ", ".join(f"{r.profile} {r.session_ms / 1000:g} s" for r in results)
    text = (
        f"SIGKILL of the partition leader at t0 (ZooKeeper session timeout: {sessions}). Each "
        "step as time since t0 (+ since the step before; medians: + between the medians): the "
        "controller's `broker_change` naming it dead (its session expired), " + STEP_TEXT
    )
    rows = _move_rows(results, lambda r: r.kills, KILL_STEPS, in_s=True)
    body = f"{text}\n\n{md_table(header, rows)}\n\n{backoff_note(results, lambda r: r.kills)}"
    return Section("Leader failover after SIGKILL", body, figures)


def stop_section(results: Sequence[ProfileResult]) -> Section:
    gaps = [float(m.gap_ms) for r in results for m in r.stops]
    figures = {
        "controlled_shutdown.gap_ms": _med(gaps),
        "controlled_shutdown.gap_max_ms": max(gaps, default=float("nan")),
        "controlled_shutdown.runs": float(len(gaps)),
    }
    for r in results:
        figures[f"controlled_shutdown.{r.profile}.gap_ms"] = _med([m.gap_ms for m in r.stops])
        figures[f"controlled_shutdown.{r.profile}.follower_backoffs"] = float(r.backoffs(r.stops))
    header = ["run", "elected ms", "applied ms", "follower ms", "first write ms", "write gap ms"]
    text = (
        "SIGTERM of the partition leader at t0: before stopping, the broker asks the controller "
        "to move its leadership (controlled shutdown). Each step as ms since t0 (+ since the "
        "step before): " + STEP_TEXT
    )
    rows = _move_rows(results, lambda r: r.stops, STOP_STEPS, in_s=False)
    rows.append(
        ["**all: median / max gap**", *[""] * 4, f"{_med(gaps):.0f} / {max(gaps, default=0):.0f}"]
    )
    body = f"{text}\n\n{md_table(header, rows)}\n\n{backoff_note(results, lambda r: r.stops)}"
    return Section("Controlled shutdown of the leader", body, figures)


def stall_section(results: Sequence[ProfileResult]) -> Section:
    rows: list[list[str]] = []
    figures: dict[str, float] = {}
    notes: list[str] = []
    for r in results:
        lag_s = r.lag_ms / 1000
        if not r.stalls:
            notes.append(
                f"- {r.profile}: not measured. A SIGSTOPped follower's session "
                f"({r.session_ms} ms) expires before its lag ({r.lag_ms} ms) runs out, so the "
                "controller, not the leader, takes it out of the ISR; the leader's rule would "
                "need a stall that keeps the session (cutting only the follower's fetch link, "
                "`cluster up --proxy`) and 30-45 s per run."
            )
            continue
        shrinks = [s.shrink_ms / 1000 for s in r.stalls]
        inside = sum(1 for x in shrinks if lag_s <= x <= 1.5 * lag_s)
        p = f"isr_shrink.{r.profile}"
        figures |= {
            f"{p}.median_s": round(_med(shrinks), 3),
            f"{p}.min_s": round(min(shrinks), 3),
            f"{p}.max_s": round(max(shrinks), 3),
            f"{p}.lag_s": lag_s,
            f"{p}.in_window": float(inside),
            f"{p}.runs": float(len(shrinks)),
            f"isr_expand.{r.profile}.median_ms": _med([s.expand_ms for s in r.stalls]),
        }
        rows.append(
            [
                r.profile,
                f"{lag_s:g} s",
                f"[{lag_s:g}, {1.5 * lag_s:g}] s",
                f"{min(shrinks):.2f} / {_med(shrinks):.2f} / {max(shrinks):.2f} s",
                f"{inside} of {len(shrinks)}",
                f"{_med([s.expand_ms for s in r.stalls]):.0f} ms",
            ]
        )
    header = ["profile", "lag", "window", "shrink min / median / max", "in window", "expand"]
    text = (
        "SIGSTOP of a follower while the probe writes: time to the leader's `isr_shrink` "
        "removing it (the check runs every lag/2, so it lands in [lag, 1.5 lag]); then SIGCONT "
        "and the median time to its `isr_expand`.\n\n"
    )
    body = text + (md_table(header, rows) if rows else "") + "\n\n" + "\n".join(notes)
    return Section("ISR shrink after a follower stall", body.strip(), figures)


def propagation_section(results: Sequence[ProfileResult]) -> Section:
    took = [float(ms) for r in results for s in r.stalls for ms in s.propagated_ms]
    applied = [float(ms) for r in results for s in r.stalls for ms in s.applied_ms]
    figures = {
        "isr_change_to_update_metadata.median_ms": _med(took),
        "isr_change_to_update_metadata.max_ms": max(took, default=float("nan")),
        "isr_change_to_update_metadata.samples": float(len(took)),
    }
    rows = [
        ["controller: node ctime → every broker answered", len(took), f"{_med(took):.0f}",
         f"{max(took, default=float('nan')):.0f}"],
        ["brokers: node written → last `metadata_updated`", len(applied), f"{_med(applied):.0f}",
         f"{max(applied, default=float('nan')):.0f}"],
    ]  # fmt: skip
    text = (
        "The isr_change nodes written after each stall run's SIGCONT (one per shrink + expand, "
        "after the propagation blackout): from the node to UpdateMetadata answered by every "
        "live broker, as the controller's `update_metadata_propagated` reports it (took_ms), "
        "and from the brokers' own lines.\n\n"
    )
    body = text + md_table(["measured by", "samples", "median ms", "max ms"], rows)
    return Section("isr_change node → UpdateMetadata", body, figures)
