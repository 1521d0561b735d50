"""The report's aggregation from ledger arrays: percentiles, the per-second series, errors,
totals, the summary lines; and that the chart is a PNG."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loadgen.chart import write_chart
from loadgen.report import (
    LedgerArrays,
    build_report,
    error_counts,
    latency_summary,
    per_second,
    percentile,
    summary_lines,
    totals,
    verdict_line,
)

T0 = 1_700_000_000_000


def ledger(rows: list[tuple[int, int, str | None]], offset: int = 0) -> LedgerArrays:
    """(send ms, ack ms, error) rows relative to T0; completed rows get `offset` (-1: the
    acks=0 producer's "no offset"), failed ones -1."""
    return LedgerArrays(
        send_ms=np.array([T0 + s for s, _, _ in rows], dtype=np.int64),
        ack_ms=np.array([T0 + a for _, a, _ in rows], dtype=np.int64),
        offsets=np.array([offset if e is None else -1 for _, _, e in rows], dtype=np.int64),
        errors=[e for _, _, e in rows],
    )


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([7], 50, 7.0),
        ([7], 99, 7.0),
        ([1, 2, 3, 4], 50, 2.0),
        ([1, 2, 3, 4], 75, 3.0),
        ([1, 2, 3, 4], 76, 4.0),
        (list(range(1, 101)), 99, 99.0),
        (list(range(1, 101)), 100, 100.0),
        (list(range(1, 1001)), 95, 950.0),
    ],
)
def test_nearest_rank_percentiles(values: list[int], q: float, expected: float | None) -> None:
    assert percentile(np.array(values), q) == expected


def test_latency_summary_names_its_percentiles() -> None:
    got = latency_summary(np.array([5, 1, 3, 2, 4]))
    assert got == {"p50": 3.0, "p95": 5.0, "p99": 5.0, "max": 5.0}
    assert latency_summary(np.array([], dtype=np.int64))["p50"] is None


def test_per_second_series_counts_acks_where_they_arrived_and_keeps_empty_seconds() -> None:
    data = ledger(
        [
            (0, 10, None),
            (0, 30, None),
            (100, 900, None),
            (200, 2500, None),  # second 2
            (300, 400, "NOT_ENOUGH_REPLICAS"),  # failed: not in the series
        ]
    )
    series = per_second(
        data.send_ms, data.ack_ms, data.ok, record_bytes=500_000, start_ms=T0, end_ms=T0 + 3500
    )
    assert [s.second for s in series] == [0, 1, 2, 3]
    assert [s.acks for s in series] == [3, 0, 1, 0]
    assert [s.mb for s in series] == [1.5, 0.0, 0.5, 0.0]
    assert (series[0].p50_ms, series[0].p99_ms) == (30.0, 800.0)
    assert (series[1].p50_ms, series[1].p99_ms) == (None, None)
    assert series[2].p50_ms == 2300.0


def test_per_second_runs_past_end_ms_when_acks_arrive_later() -> None:
    data = ledger([(0, 4200, None)])
    series = per_second(
        data.send_ms, data.ack_ms, data.ok, record_bytes=1, start_ms=T0, end_ms=T0 + 1000
    )
    assert len(series) == 5 and series[4].acks == 1


def test_errors_are_counted_by_code() -> None:
    errors = [None, "REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS: isr 1 < 2", "REQUEST_TIMED_OUT"]
    assert error_counts(errors) == {"REQUEST_TIMED_OUT": 2, "NOT_ENOUGH_REPLICAS": 1}
    assert list(error_counts(errors)) == ["REQUEST_TIMED_OUT", "NOT_ENOUGH_REPLICAS"]


def test_totals_measure_the_producing_window() -> None:
    data = ledger([(0, 100, None), (500, 2000, None), (600, 700, "REQUEST_TIMED_OUT")])
    got = totals(data, record_bytes=1_000_000)
    assert got == {
        "sent": 3,
        "acked": 2,
        "unconfirmed": 0,
        "failed": 1,
        "window_s": 2.0,
        "records_per_s": 1.0,
        "mb_per_s": 1.0,
    }


def test_acks_0_records_complete_unconfirmed() -> None:
    data = ledger([(0, 100, None), (0, 1000, None)], offset=-1)
    got = totals(data, record_bytes=1)
    assert (got["acked"], got["unconfirmed"], got["failed"]) == (0, 2, 0)
    assert got["records_per_s"] == 2.0


VERIFIED = {
    "sent": 3,
    "acked": 2,
    "failed": 1,
    "topic_records": 2,
    "missing": 0,
    "moved": 0,
    "duplicates": 0,
    "out_of_order": 0,
    "unacknowledged_present": 0,
    "unconfirmed": 0,
    "unconfirmed_lost": 0,
    "ok": True,
}
FAULT = {
    "text": "at=1s kill leader",
    "action": "kill",
    "target": "leader",
    "process": "broker-2",
    "planned_s": 1.0,
    "wall_ms": T0 + 1500,
    "offset_s": 1.0,
    "error": None,
}


def sample_report() -> dict[str, Any]:
    data = ledger([(0, 100, None), (500, 2000, None), (600, 700, "REQUEST_TIMED_OUT")])
    return build_report(
        data,
        run={"topic": "t", "acks": "all", "record_size": 1000},
        record_bytes=1000,
        end_ms=T0 + 3000,
        verification=VERIFIED,
        faults=[FAULT],
    )


def test_the_report_runs_from_the_first_send_and_places_faults_on_that_clock() -> None:
    report = sample_report()
    assert report["load_started_ms"] == T0
    assert report["faults"][0]["at_s"] == 1.5
    assert len(report["series"]) == 3
    assert report["totals"]["acked"] == 2 and report["errors"] == {"REQUEST_TIMED_OUT": 1}
    assert report["latency_ms"]["max"] == 1500.0


def test_summary_lines_end_with_the_verdict() -> None:
    lines = summary_lines(sample_report())
    assert lines[0].startswith("records: 3 sent, 2 acknowledged, 1 failed in 2.0 s: 1 records/s")
    assert "errors: REQUEST_TIMED_OUT 1" in lines
    assert "fault 'at=1s kill leader' -> broker-2: done 1.5 s after the first record" in lines
    assert lines[-1].startswith("verification: OK: 0 of 2 acknowledged records missing")
    failed = summary_lines(
        {**sample_report(), "verification": {**VERIFIED, "missing": 1, "ok": False}}
    )
    assert failed[-1].startswith("verification: FAILED: 1 of 2")
    acks0 = {**VERIFIED, "unconfirmed": 9, "unconfirmed_lost": 4}
    assert summary_lines({**sample_report(), "verification": acks0})[-1].endswith(
        "; 4 of 9 unconfirmed (acks=0) lost"
    )


def test_the_chart_is_a_png(tmp_path: Path) -> None:
    path = tmp_path / "chart.png"
    write_chart(sample_report(), path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_verdict_says_whether_a_transactional_run_was_exactly_once() -> None:
    base = {"ok": True, "missing": 0, "acked": 10, "moved": 0, "duplicates": 0,
            "out_of_order": 0, "unacknowledged_present": 0, "unconfirmed": 0}  # fmt: skip
    assert "exactly-once" not in verdict_line(base)
    assert "; exactly-once: yes" in verdict_line({**base, "exactly_once": True})
    assert "; exactly-once: NO" in verdict_line({**base, "ok": False, "exactly_once": False})
