"""A load run's report: totals, ack latency percentiles, errors by code and a per-second time
series computed from the ledger, plus the verification verdict and the executed faults.

The aggregation is pure (arrays in, numbers out); loading the ledger and writing report.json
are the thin shell at the bottom. The chart is drawn by loadgen.chart from the same report.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow.dataset as ds

Ints = npt.NDArray[np.int64]
Bools = npt.NDArray[np.bool_]
PERCENTILES = (50, 95, 99)
MB = 1_000_000


@dataclass(frozen=True)
class LedgerArrays:
    """The ledger columns the report needs, one entry per record sent. A record without an
    error completed: acknowledged at an offset, or sent with acks=0 (offset -1, unconfirmed)."""

    send_ms: Ints
    ack_ms: Ints
    offsets: Ints
    errors: list[str | None]

    @property
    def ok(self) -> Bools:
        return np.array([e is None for e in self.errors], dtype=np.bool_)

    @property
    def acked(self) -> Bools:
        return self.ok & (self.offsets >= 0)


@dataclass(frozen=True)
class Second:
    """One second of the run (from its start): the records completed in it (acknowledged, or
    sent with acks=0), their value megabytes, and their latency percentiles (None: none)."""

    second: int
    acks: int
    mb: float
    p50_ms: float | None
    p99_ms: float | None


# ---- pure aggregation ---------------------------------------------------------------------------


def percentile(sorted_values: npt.NDArray[Any], q: float) -> float | None:
    """Nearest-rank percentile of an ascending array (None when empty): the smallest value with
    at least q% of the values at or below it, so p100 is the maximum and every answer was seen."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = max(1, math.ceil(q / 100 * n))
    return float(sorted_values[rank - 1])


def latency_summary(latencies_ms: npt.NDArray[Any]) -> dict[str, float | None]:
    ordered = np.sort(latencies_ms)
    out = {f"p{q}": percentile(ordered, q) for q in PERCENTILES}
    out["max"] = percentile(ordered, 100)
    return out


def per_second(
    send_ms: Ints, ack_ms: Ints, ok: Bools, *, record_bytes: int, start_ms: int, end_ms: int
) -> list[Second]:
    """The time series from `start_ms` to `end_ms`, one entry per second including the empty
    ones (a stall during a fault must show as zeros, not as a gap)."""
    acks = ack_ms[ok]
    latency = (acks - send_ms[ok]).astype(np.float64)
    seconds = np.maximum((acks - start_ms) // 1000, 0)
    span = max(math.ceil((end_ms - start_ms) / 1000), int(seconds.max()) + 1 if len(acks) else 0)
    order = np.argsort(seconds, kind="stable")
    seconds, latency = seconds[order], latency[order]
    bounds = np.searchsorted(seconds, np.arange(span + 1))
    series = []
    for s in range(span):
        chunk = np.sort(latency[bounds[s] : bounds[s + 1]])
        series.append(
            Second(
                second=s,
                acks=len(chunk),
                mb=round(len(chunk) * record_bytes / MB, 6),
                p50_ms=percentile(chunk, 50),
                p99_ms=percentile(chunk, 99),
            )
        )
    return series


def error_counts(errors: Iterable[str | None]) -> dict[str, int]:
    """Failed records by error code (the ledger stores Kafka's code names), most frequent first."""
    counts = Counter(e.split(":", 1)[0].strip() for e in errors if e is not None)
    return dict(counts.most_common())


def totals(ledger: LedgerArrays, record_bytes: int) -> dict[str, Any]:
    """Counts, and the throughput of completed records over the producing window (first send
    to last completion)."""
    ok = ledger.ok
    completed, acked = int(ok.sum()), int(ledger.acked.sum())
    window_ms = 0
    if completed:
        window_ms = int(ledger.ack_ms[ok].max() - ledger.send_ms.min())
    window_s = max(window_ms, 1) / 1000
    return {
        "sent": len(ledger.errors),
        "acked": acked,
        "unconfirmed": completed - acked,
        "failed": len(ledger.errors) - completed,
        "window_s": round(window_s, 3),
        "records_per_s": round(completed / window_s, 1),
        "mb_per_s": round(completed * record_bytes / MB / window_s, 3),
    }


def build_report(
    ledger: LedgerArrays,
    *,
    run: Mapping[str, Any],
    record_bytes: int,
    end_ms: int,
    verification: Mapping[str, Any] | None,
    faults: Sequence[Mapping[str, Any]],
    isr_changes: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """Everything report.json holds (see README, "Load generator"). Time runs from the first
    record sent: the series' second 0 and each fault's `at_s` (by its wall-clock time)."""
    ok = ledger.ok
    start_ms = int(ledger.send_ms.min()) if len(ledger.send_ms) else end_ms
    series = per_second(
        ledger.send_ms,
        ledger.ack_ms,
        ok,
        record_bytes=record_bytes,
        start_ms=start_ms,
        end_ms=end_ms,
    )
    return {
        "run": dict(run),
        "totals": totals(ledger, record_bytes),
        "latency_ms": latency_summary(ledger.ack_ms[ok] - ledger.send_ms[ok]),
        "errors": error_counts(ledger.errors),
        "verification": None if verification is None else dict(verification),
        "load_started_ms": start_ms,
        "faults": [{**f, "at_s": round((f["wall_ms"] - start_ms) / 1000, 3)} for f in faults],
        "isr_changes": [
            {**c, "at_s": round((c["ts"] - start_ms) / 1000, 3)}
            for c in isr_changes
            if start_ms <= c["ts"] <= end_ms
        ],
        "series": [asdict(s) for s in series],
    }


# ---- the terminal summary -----------------------------------------------------------------------


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def summary_lines(report: Mapping[str, Any]) -> list[str]:
    t, lat = report["totals"], report["latency_ms"]
    unconfirmed = f", {t['unconfirmed']:,} unconfirmed (acks=0)" if t["unconfirmed"] else ""
    lines = [
        f"records: {t['sent']:,} sent, {t['acked']:,} acknowledged{unconfirmed}, "
        f"{t['failed']:,} failed in {t['window_s']:.1f} s: "
        f"{t['records_per_s']:,.0f} records/s, {t['mb_per_s']:.2f} MB/s",
        "ack latency ms: " + "  ".join(f"{k} {_ms(v)}" for k, v in lat.items()),
        "errors: " + (", ".join(f"{code} {n:,}" for code, n in report["errors"].items()) or "none"),
    ]
    for f in report["faults"]:
        hit = f" -> {f['process']}" if f["process"] and f["process"] != f["target"] else ""
        outcome = f"FAILED: {f['error']}" if f["error"] else "done"
        lines.append(
            f"fault '{f['text']}'{hit}: {outcome} {f['at_s']:.1f} s after the first record"
        )
    for c in report.get("isr_changes", []):
        lines.append(
            f"{c['event']} of {c['tp']} by {c['proc']}: ISR {c['isr']} {c['at_s']:.1f} s after "
            "the first record"
        )
    lines.append(verdict_line(report["verification"]))
    return lines


def verdict_line(v: Mapping[str, Any] | None) -> str:
    if v is None:
        return "verification: not run"
    verdict = "OK" if v["ok"] else "FAILED"
    return (
        f"verification: {verdict}: {v['missing']:,} of {v['acked']:,} acknowledged records "
        f"missing ({v['moved']:,} at another offset); {v['duplicates']:,} duplicates, "
        f"{v['out_of_order']:,} out of order, {v['unacknowledged_present']:,} present but "
        "never acknowledged"
        + (
            f"; {v['unconfirmed_lost']:,} of {v['unconfirmed']:,} unconfirmed (acks=0) lost"
            if v["unconfirmed"]
            else ""
        )
        + (
            f"; {v['expired']:,} acknowledged records already past retention (not checked)"
            if v.get("expired")
            else ""
        )
        + _exactly_once(v.get("exactly_once"))
    )


def _exactly_once(verdict: bool | None) -> str:
    """--transactional runs: what read_committed showed."""
    if verdict is None:
        return ""
    if verdict:
        return (
            "; exactly-once: yes (read_committed: every committed record once, no gap, "
            "nothing of an aborted transaction)"
        )
    return "; exactly-once: NO (read_committed shows a duplicate, a gap or aborted records)"


# ---- the shell: ledger in, report.json out ------------------------------------------------------


def load_ledger(ledger_dir: Path) -> LedgerArrays:
    """The ledger's Parquet files (names starting with "." or "_" are in-progress files)."""
    table = ds.dataset(str(ledger_dir), format="parquet").to_table(
        columns=["send_ms", "ack_ms", "offset", "error"]
    )
    return LedgerArrays(
        send_ms=table.column("send_ms").to_numpy().astype(np.int64),
        ack_ms=table.column("ack_ms").to_numpy().astype(np.int64),
        offsets=table.column("offset").to_numpy().astype(np.int64),
        errors=table.column("error").to_pylist(),
    )


def write_report(report: Mapping[str, Any], path: Path) -> None:
    path.write_text(json.dumps(report, indent=2) + "\n")
