"""chart.png of a load run: throughput and ack latency per second, with a vertical line at
every executed fault, drawn from report.json's series (matplotlib's Agg backend: no display)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)

from loadgen.report import MB  # noqa: E402


def write_chart(report: Mapping[str, Any], path: Path) -> None:
    series = report["series"]
    x = [s["second"] for s in series]
    fig, (top, bottom) = plt.subplots(2, 1, sharex=True, figsize=(10, 6), layout="constrained")
    try:
        top.plot(x, [s["acks"] for s in series], color="tab:blue", marker=".")
        top.set_ylabel("acknowledged records/s")
        # MB/s is acks/s times the record size: one line, a second scale on the right.
        mb_per_ack = report.get("run", {}).get("record_size", 0) / MB
        if mb_per_ack:
            right = top.secondary_yaxis(
                "right", functions=(lambda a: a * mb_per_ack, lambda m: m / mb_per_ack)
            )
            right.set_ylabel("MB/s")
        for key, color in (("p50_ms", "tab:orange"), ("p99_ms", "tab:red")):
            ys = [float("nan") if s[key] is None else s[key] for s in series]
            bottom.plot(x, ys, color=color, marker=".", label=key.replace("_ms", ""))
        bottom.set_ylabel("ack latency (ms)")
        bottom.set_xlabel("seconds since the first record was sent")
        bottom.legend(loc="upper left")
        _mark_faults(report.get("faults", []), (top, bottom))
        _mark_isr_changes(report.get("isr_changes", []), (top, bottom))
        run = report.get("run", {})
        top.set_title(
            f"topic {run.get('topic', '?')}, acks={run.get('acks', '?')}: "
            f"{report['totals']['sent']:,} records sent, {report['totals']['acked']:,} acknowledged"
        )
        fig.savefig(path, dpi=100)
    finally:
        plt.close(fig)


def _mark_isr_changes(changes: list[Mapping[str, Any]], axes: tuple[Any, ...]) -> None:
    # Leader-written ISR changes (isr_shrink / isr_expand) from the brokers' event logs.
    for c in changes:
        color = "tab:red" if c["event"] == "isr_shrink" else "tab:green"
        for ax in axes:
            ax.axvline(c["at_s"], color=color, linestyle=":", linewidth=1)
        axes[0].annotate(
            f"{c['event'].removeprefix('isr_')} {c['tp']}",
            (c["at_s"], 0.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="bottom",
            fontsize=7,
            color=color,
        )


def _mark_faults(faults: list[Mapping[str, Any]], axes: tuple[Any, ...]) -> None:
    for f in faults:
        for ax in axes:
            ax.axvline(f["at_s"], color="black", linestyle="--", linewidth=1)
        label = f"{f['action']} {f['process'] or f['target']}"
        axes[0].annotate(
            label,
            (f["at_s"], 1.0),
            xycoords=("data", "axes fraction"),
            rotation=90,
            va="top",
            ha="right",
            fontsize=8,
        )
