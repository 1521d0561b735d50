"""Goals of `python -m bench all` judged from the dashboard's and the reassignment's figures
(the rest are judged in bench/suite.py)."""

from __future__ import annotations

from bench import report


def dashboard_goals(figures: dict[str, float]) -> list[report.Goal]:
    goals = []
    if "dashboard.throughput_ratio" in figures:
        ratio = figures["dashboard.throughput_ratio"]
        goals.append(
            report.Goal(
                "produce throughput with the dashboard open ÷ without (medians)",
                "≥ 0.95",
                f"{ratio:.3f}",
                ratio >= 0.95,
            )
        )
    for n in sorted({int(k.split(".")[1]) for k in figures if k.startswith("dashboard.") and
                     k.split(".")[1].isdigit()}):  # fmt: skip
        cpu = figures[f"dashboard.{n}.idle_cpu_pct"]
        goals.append(
            report.Goal(
                f"{n:,} partitions: the dashboard's CPU, idle", "≤ 5%", f"{cpu:.1f}%", cpu <= 5.0
            )  # fmt: skip
        )
        p99, worst = figures[f"dashboard.{n}.delay_p99_ms"], figures[f"dashboard.{n}.delay_max_ms"]
        burst = figures[f"dashboard.{n}.burst_delay_p99_ms"]
        changes = figures[f"dashboard.{n}.burst_changes"]
        goals.append(
            report.Goal(
                f"{n:,} partitions: an ISR change in ZooKeeper → on the page (p99)",
                "≤ 1 s",
                f"{p99:.0f} ms (max {worst:.0f} ms); in a burst of {changes:.0f}: {burst:.0f} ms",
                p99 <= 1000,
            )
        )
    return goals


def reassign_goals(figures: dict[str, float]) -> list[report.Goal]:
    if "reassign.throttled_s" not in figures:
        return []
    took, expected = figures["reassign.throttled_s"], figures["reassign.expected_s"]
    off = (took - expected) / expected
    rate = figures["reassign.rate_mb"]
    return [
        report.Goal(
            f"a throttled move ({figures['reassign.size_mb']:.0f} MB at {rate:g} MB/s) ÷ size/rate",
            "within ±15%",
            f"{took:.1f} s ÷ {expected:.1f} s = {took / expected:.2f}",
            abs(off) <= 0.15,
        ),
        report.Goal(
            "acks=all p99 on the same brokers: no move / unthrottled move / throttled move",
            "printed, whatever it is",
            f"{figures['reassign.p99_no_move_ms']:.1f} / "
            f"{figures['reassign.p99_unthrottled_ms']:.1f} / "
            f"{figures['reassign.p99_throttled_ms']:.1f} ms",
            None,
        ),
    ]
